// Command coredns runs CoreDNS with its standard plugins, the Kubernetes node's cluster DNS.
package main

import (
	_ "github.com/coredns/coredns/core/plugin"
	"github.com/coredns/coredns/coremain"
)

func main() { coremain.Run() }
