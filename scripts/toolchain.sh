# Sourced by every script of scripts/ and bench/ that runs go (and exported
# by the Makefile): the Go toolchain is the one the go.mod files name on
# their `toolchain` line (go1.27.3), fetched once through the Go module proxy
# by the go command itself. A Go installation's own go.env may say
# GOTOOLCHAIN=local (this project's machines do), which makes go ignore that
# line; "auto" makes it honour it. The `go` line stays 1.26.8, so a plain
# `go test` with an older local Go still builds; the scripts need 1.27 for
# the fuzz step (Go 1.26's fuzz coordinator could fail a target at the end
# of -fuzztime with a bare "context deadline exceeded", golang/go#75804,
# fixed in 1.27). Set GOTOOLCHAIN yourself to override.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
