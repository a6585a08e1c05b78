package demo

import (
	"errors"
	"io"
)

// Simulate tells the story without root. TODO: run the same timeline
// through the policy engine as evictd simulate does.
func Simulate(w io.Writer) (*Summary, error) {
	return nil, errors.New("the no-root story is not built yet")
}
