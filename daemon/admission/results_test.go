package admission

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A reservation that does not fit waits for one given back, in order: a
// big one is not passed by later small ones; a waiter leaves at its ctx's
// end or the drain.
func TestResults(t *testing.T) {
	r := NewResults(100)
	a, err := r.Acquire(context.Background(), 60, nil)
	if err != nil {
		t.Fatal(err)
	}
	// More than the budget is the whole budget: it waits for A.
	got := make(chan *Reservation)
	go func() {
		big, err := r.Acquire(context.Background(), 1000, nil)
		if err != nil {
			t.Error(err)
		}
		got <- big
	}()
	for r.sem.TryAcquire(0) { // until the big one waits (TryAcquire(0) fails behind a waiter)
		time.Sleep(time.Millisecond)
	}
	// A small one that would fit beside A waits behind the big one.
	ctx, cancel := context.WithCancel(context.Background())
	small := make(chan error, 1)
	go func() {
		_, err := r.Acquire(ctx, 10, nil)
		small <- err
	}()
	select {
	case err := <-small:
		t.Fatalf("a small reservation passed a big one waiting before it (err %v)", err)
	case <-time.After(50 * time.Millisecond): // a wrong pass at worst, never a wrong fail
	}
	cancel()
	if err := <-small; !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose ctx ended: %v, want context.Canceled", err)
	}
	// A's answer is 10 bytes: the rest goes back, not yet enough.
	a.Shrink(10)
	if r.InUse() != 10 {
		t.Fatalf("InUse %d after A shrank to 10", r.InUse())
	}
	a.Release()
	big := <-got
	if r.InUse() != 100 {
		t.Fatalf("InUse %d, want the whole budget 100", r.InUse())
	}
	stop := make(chan struct{})
	drained := make(chan error, 1)
	go func() {
		_, err := r.Acquire(context.Background(), 1, stop)
		drained <- err
	}()
	close(stop)
	if err := <-drained; !errors.Is(err, ErrShuttingDown) {
		t.Fatalf("a waiter at the drain: %v, want ErrShuttingDown", err)
	}
	big.Release()
	big.Release()
	if r.InUse() != 0 {
		t.Fatalf("InUse %d after every reservation was given back (one twice), want 0", r.InUse())
	}
	if _, err := r.Acquire(context.Background(), 100, nil); err != nil {
		t.Fatalf("the whole budget after a double release: %v", err)
	}
	if r.sem.TryAcquire(1) {
		t.Fatal("a double release gave back more than was reserved")
	}
}
