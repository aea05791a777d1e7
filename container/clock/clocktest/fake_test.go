package clocktest

import (
	"slices"
	"testing"
	"time"
)

func TestAdvanceFiresInOrder(t *testing.T) {
	start := time.Unix(1000, 0)
	f := New(start)
	var got []string
	f.AfterFunc(2*time.Second, func() { got = append(got, "b") })
	var rearm interface{ Reset(time.Duration) bool }
	rearm = f.AfterFunc(time.Second, func() {
		got = append(got, "a")
		if len(got) == 1 {
			rearm.Reset(1500 * time.Millisecond) // at 2.5 s: within the next Advance
		}
	})
	stopped := f.AfterFunc(time.Second, func() { got = append(got, "stopped") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop: want true for an armed timer, then false")
	}
	ch := f.After(3 * time.Second)
	if d, ok := f.Next(); !ok || d != time.Second {
		t.Fatalf("Next = %v, %v; want 1s", d, ok)
	}
	if f.Waiters() != 3 {
		t.Fatalf("Waiters = %d, want 3", f.Waiters())
	}
	f.Advance(999 * time.Millisecond)
	if len(got) != 0 {
		t.Fatalf("fired early: %v", got)
	}
	f.Advance(2001 * time.Millisecond)
	if want := []string{"a", "b", "a"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	select {
	case at := <-ch:
		if !at.Equal(start.Add(3 * time.Second)) {
			t.Errorf("After sent %v, want %v", at, start.Add(3*time.Second))
		}
	default:
		t.Error("After's channel got nothing at its time")
	}
	if f.Now() != start.Add(3*time.Second) || f.Waiters() != 0 {
		t.Errorf("Now %v, %d waiters", f.Now(), f.Waiters())
	}
}

func TestBlockUntil(t *testing.T) {
	f := New(time.Unix(0, 0))
	if f.BlockUntil(1, time.Millisecond) {
		t.Fatal("BlockUntil(1) with no timer armed reported true")
	}
	go f.After(time.Hour)
	if !f.BlockUntil(1, time.Minute) {
		t.Fatal("BlockUntil(1) missed a timer armed by another goroutine")
	}
}
