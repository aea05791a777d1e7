package locks

import (
	"os"
	"sync"
	"testing"
	"time"
)

// Slot lock files go with their slots: many takes and releases leave the
// directory empty (before, a file stayed for every slot ever used).
func TestSlotFilesDoNotPileUp(t *testing.T) {
	a := &Allocator{Dir: t.TempDir()}
	for range 1000 {
		s, err := a.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		s.Release()
	}
	b, err := a.AcquireBlock()
	if err != nil {
		t.Fatal(err)
	}
	b.Release()
	if ents, _ := os.ReadDir(a.Dir); len(ents) != 0 {
		t.Errorf("%d lock files left, e.g. %s", len(ents), ents[0].Name())
	}
}

// Allocators sharing the host's directory (two engines, whatever their run
// dirs) never hold the same slot at once, while slot files come and go
// under them; the sweep of free files (RemoveStale) runs meanwhile.
func TestAllocatorsNeverShareASlot(t *testing.T) {
	dir, liveDir := t.TempDir(), t.TempDir()
	var mu sync.Mutex
	held := map[int]bool{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				RemoveStale(dir, liveDir, time.Minute)
			}
		}
	}()
	engines := []*Allocator{{Dir: dir}, {Dir: dir}}
	for w := range 8 {
		a := engines[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				s, err := a.Acquire()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if held[s.n] {
					t.Errorf("slot %d handed out twice", s.n)
				}
				held[s.n] = true
				mu.Unlock()
				mu.Lock()
				delete(held, s.n)
				mu.Unlock()
				s.Release()
			}
		}()
	}
	wg.Wait()
	close(stop)
}

// RemoveStale deletes free slot files at once, and free liveness files of
// its own directory once they are old; held ones stay.
func TestRemoveStale(t *testing.T) {
	dir, liveDir := t.TempDir(), t.TempDir()
	mk := func(p string, age time.Duration) string {
		t.Helper()
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		mt := time.Now().Add(-age)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
		return p
	}
	freeSlot := mk(dir+"/uid-7.lock", 0)
	heldSlot := mk(dir+"/uid-8.lock", 0)
	oldLive := mk(LivePath(liveDir, "old"), 2*time.Minute)
	newLive := mk(LivePath(liveDir, "new"), 0)
	f, err := Linked(heldSlot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	RemoveStale(dir, liveDir, time.Minute)
	for p, want := range map[string]bool{freeSlot: false, heldSlot: true, oldLive: false, newLive: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", p, err == nil, want)
		}
	}
}

// The protocol under the slots, on one contended file: takers (Linked),
// releasers that remove the file (unlock) and the sweep (RemoveStale)
// racing, and never two holders at once. Without Linked's check a taker
// that locked a just-removed file would hold it alongside the taker of the
// new one.
func TestLinkedLocksAreExclusive(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/uid-1.lock"
	var mu sync.Mutex
	holders := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				if i%100 == 0 {
					RemoveStale(dir, dir, time.Minute)
				}
				f, err := Linked(path)
				if err != nil {
					continue
				}
				mu.Lock()
				holders++
				if holders > 1 {
					t.Errorf("%d holders of one slot", holders)
				}
				mu.Unlock()
				mu.Lock()
				holders--
				mu.Unlock()
				unlock(f)
			}
		}()
	}
	wg.Wait()
}

// BenchmarkSlot is what a run pays for its uid slot: take and release.
func BenchmarkSlot(b *testing.B) {
	a := &Allocator{Dir: b.TempDir()}
	for b.Loop() {
		s, err := a.Acquire()
		if err != nil {
			b.Fatal(err)
		}
		s.Release()
	}
}
