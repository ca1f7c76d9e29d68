"""`lakehouse bench …`: each benchmark in a module of its own, and the record they append to."""
