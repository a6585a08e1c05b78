package v1

import (
	"bytes"
	"errors"
	"io"

	"github.com/evictd/evictd/internal/cgroup"
)

// freezerSince is the kernel that added the v1 freezer controller.
const freezerSince = "2.6.28"

// FreezerState is the value of a v1 freezer cgroup's freezer.state.
type FreezerState string

// The states freezer.state reads as (Documentation/admin-guide/cgroup-v1/freezer-subsystem.rst).
const (
	Thawed   FreezerState = "THAWED"
	Freezing FreezerState = "FREEZING" // asked to freeze; some task has not stopped yet
	Frozen   FreezerState = "FROZEN"
)

// ErrUnknownFreezerState is wrapped by the *cgroup.ParseError for a
// freezer.state that is none of THAWED, FREEZING, FROZEN.
var ErrUnknownFreezerState = errors.New("not THAWED, FREEZING or FROZEN")

// ReadFreezerState reads freezer.state of a freezer cgroup.
func ReadFreezerState(dir string) (FreezerState, error) {
	return cgroup.ReadFile(dir, "freezer.state", freezerSince, parseFreezerState)
}

func parseFreezerState(r io.Reader) (FreezerState, error) {
	b, err := cgroup.Bytes(r)
	if err != nil {
		return "", err
	}
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return "", &cgroup.ParseError{Line: 1, Err: cgroup.ErrEmpty}
	}
	if i := bytes.IndexByte(t, '\n'); i >= 0 {
		return "", &cgroup.ParseError{Line: 2, Token: string(t[i+1:]), Err: cgroup.ErrExtra}
	}
	switch s := FreezerState(t); s {
	case Thawed, Freezing, Frozen:
		return s, nil
	}
	return "", &cgroup.ParseError{Line: 1, Token: string(t), Err: ErrUnknownFreezerState}
}

// WriteFreezerState writes freezer.state: Frozen asks every task of the
// cgroup to freeze (the file reads FREEZING until all have), Thawed lets
// them run again.
func WriteFreezerState(dir string, s FreezerState) error {
	return cgroup.WriteFile(dir, "freezer.state", freezerSince, string(s))
}
