"""`lakehouse bench soak`: hours of load with maintenance on, sampled, plotted and compared."""
