package initproc

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// Spares keeps up to n placed inits ready, refilling in the background.
type Spares struct {
	taken   atomic.Int64 // runs served by a spare
	newProc func() (*Proc, error)
	log     *slog.Logger
	ready   chan *Proc
	kick    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
}

// NewSpares starts keeping n inits made by newProc ready.
func NewSpares(n int, newProc func() (*Proc, error), log *slog.Logger) *Spares {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Spares{newProc: newProc, log: log, ready: make(chan *Proc, n), kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go s.refill()
	s.kick <- struct{}{}
	return s
}

// Take returns a ready init, or nil when none is ready.
func (s *Spares) Take() *Proc {
	select {
	case p := <-s.ready:
		s.taken.Add(1)
		select {
		case s.kick <- struct{}{}:
		default:
		}
		return p
	default:
		return nil
	}
}

// Taken counts the runs served by a spare.
func (s *Spares) Taken() int64 { return s.taken.Load() }

// Full reports whether every spare is ready.
func (s *Spares) Full() bool { return len(s.ready) == cap(s.ready) }

func (s *Spares) refill() {
	defer close(s.done)
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
		}
		for len(s.ready) < cap(s.ready) && s.ctx.Err() == nil {
			p, err := s.newProc()
			if err == nil {
				if err = p.Place(); err != nil {
					p.Destroy()
				}
			}
			if err != nil {
				s.log.Warn("prepare spare sandbox", "err", err)
				break
			}
			s.ready <- p
		}
	}
}

// Close stops refilling and destroys the inits that are ready.
func (s *Spares) Close() {
	s.cancel()
	<-s.done
	for {
		select {
		case p := <-s.ready:
			p.Destroy()
		default:
			return
		}
	}
}
