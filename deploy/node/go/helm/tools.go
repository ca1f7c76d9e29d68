//go:build tools

// Package tools names the command this module builds, so `go mod tidy` keeps what it needs.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
