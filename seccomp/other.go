//go:build !linux

package seccomp

import (
	"errors"
	"fmt"
)

// Compile is unavailable off Linux.
func (p *Profile) Compile() (Program, error) {
	return nil, fmt.Errorf("%w: %w", ErrCompile, errors.ErrUnsupported)
}

// Install is unavailable off Linux.
func (p Program) Install() error { return errors.ErrUnsupported }
