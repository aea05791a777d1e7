package pool

import (
	"slices"
	"time"

	"github.com/nsbox/nsbox/container"
	"github.com/nsbox/nsbox/container/runner"
)

// refillBuckets are the upper bounds, in seconds, of the refill-time
// histogram in Stats.
var refillBuckets = [...]float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// RefillBuckets returns the histogram's bucket bounds in seconds.
func RefillBuckets() []float64 { return slices.Clone(refillBuckets[:]) }

// histogram counts refill durations.
type histogram struct {
	counts [len(refillBuckets)]uint64 // not cumulative
	count  uint64
	sum    time.Duration
	last   time.Duration
}

func (h *histogram) observe(d time.Duration) {
	for i, b := range refillBuckets {
		if d.Seconds() <= b {
			h.counts[i]++
			break
		}
	}
	h.count++
	h.sum += d
	h.last = d
}

// Stats describe one profile now.
type Stats struct {
	Name      string
	Rootfs    string
	Language  runner.Language
	Limits    container.Limits
	Env       []string
	Preimport []string
	// Skipped lists the pre-imports the rootfs could not import.
	Skipped []string

	Size     int // runners kept ready
	Ready    int // ready now
	Spawning int // refills under way

	Hits      uint64 // takes that got a runner
	Misses    uint64 // matching takes that found none ready (cold starts)
	Forked    int    // ready now and forked from a zygote
	Discarded uint64 // runners that died while waiting
	Replaced  uint64 // runners started cold, replaced once a zygote was ready
	Failures  uint64 // refills that failed
	LastError string // the last refill's error, "" once one succeeds

	// Refills counts successful refills; RefillSum is their total time,
	// LastRefill the latest's. RefillCounts are per bucket of
	// RefillBuckets (not cumulative); slower ones are in none.
	Refills      uint64
	RefillSum    time.Duration
	LastRefill   time.Duration
	RefillCounts []uint64
}

// Stats describes every profile, in configuration order.
func (p *Pool) Stats() []Stats {
	out := make([]Stats, 0, len(p.profiles))
	for _, pr := range p.profiles {
		pr.mu.Lock()
		forked := 0
		for _, e := range pr.ready {
			if e.m.Forked() {
				forked++
			}
		}
		out = append(out, Stats{
			Name: pr.Name, Rootfs: pr.Rootfs, Language: pr.Language, Limits: pr.Limits, Env: pr.Env, Preimport: pr.Preimport, Skipped: pr.skipped,
			Size: pr.Size, Ready: len(pr.ready), Spawning: pr.spawning, Forked: forked,
			Hits: pr.hits, Misses: pr.misses, Discarded: pr.discarded, Replaced: pr.replaced, Failures: pr.failures, LastError: pr.lastErr,
			Refills: pr.refills.count, RefillSum: pr.refills.sum, LastRefill: pr.refills.last,
			RefillCounts: slices.Clone(pr.refills.counts[:]),
		})
		pr.mu.Unlock()
	}
	return out
}
