//go:build tools

// Package tools names the command this module builds, so `go mod tidy` keeps what it needs.
package tools

import _ "github.com/kubeflow/spark-operator/v2/cmd/operator"
