package session

import (
	"fmt"

	"github.com/nsbox/nsbox/cgroup"
)

// Stats reads the session's cgroup (CPU, memory, pids) and how many bytes
// its workspace holds.
func (s *Session) Stats() (_ cgroup.Stats, workspaceBytes int64, _ error) {
	sb := s.r.Sandbox()
	st, err := sb.Stats()
	if err != nil {
		return st, 0, fmt.Errorf("session %s: %w", s.id, err)
	}
	used, err := sb.Workspace().Used()
	if err != nil {
		return st, 0, fmt.Errorf("session %s: %w", s.id, err)
	}
	return st, used, nil
}
