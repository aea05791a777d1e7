package runner

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSealRetry: a seal refused with EBUSY is tried again after a
// growing wait, up to sealAttempts; one still busy is ErrStateBusy (with
// ErrState) naming the last error; any other error is not retried.
func TestSealRetry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		busy      int   // EBUSY answers before other
		other     error // the answer after them; nil: success
		wantErr   error
		wantTries int
	}{
		{"sealed at once", 0, nil, nil, 1},
		{"busy twice", 2, nil, nil, 3},
		{"busy until the last try", sealAttempts - 1, nil, nil, sealAttempts},
		{"busy throughout", sealAttempts + 3, nil, ErrStateBusy, sealAttempts},
		{"another error", 0, unix.EINVAL, ErrState, 1},
		{"busy, then another error", 1, unix.EPERM, ErrState, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			var waits []time.Duration
			err := sealRetrying(func() error {
				tries++
				if tries <= tc.busy {
					return unix.EBUSY
				}
				return tc.other
			}, func(d time.Duration) { waits = append(waits, d) })
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrState) {
				t.Errorf("err = %v: not ErrState", err)
			}
			if tc.wantErr != ErrStateBusy && errors.Is(err, ErrStateBusy) {
				t.Errorf("err = %v: ErrStateBusy for an error that is not EBUSY", err)
			}
			if tc.wantErr == ErrStateBusy && !strings.Contains(err.Error(), unix.EBUSY.Error()) {
				t.Errorf("err = %v: the last error is not named", err)
			}
			if tries != tc.wantTries {
				t.Errorf("%d tries, want %d", tries, tc.wantTries)
			}
			var want []time.Duration
			for i := 1; i < tc.wantTries; i++ {
				want = append(want, sealBackoff<<(i-1))
			}
			if !slices.Equal(waits, want) {
				t.Errorf("waits %v, want %v", waits, want)
			}
		})
	}
}

// pinnedMemfd returns a memfd of one page, pinned by a pipe holding a
// vmsplice of it: until drain empties the pipe, the page has a reference
// that the kernel's F_SEAL_WRITE waits for (150 ms here) and gives up on
// (EBUSY).
func pinnedMemfd(t *testing.T) (f *os.File, drain func()) {
	t.Helper()
	f, err := newMemfd()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	page := os.Getpagesize()
	if _, err := f.Write([]byte(strings.Repeat("x", page))); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, page, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(p[0]), "pipe"), os.NewFile(uintptr(p[1]), "pipe")
	t.Cleanup(func() { r.Close(); w.Close() })
	if n, err := unix.Vmsplice(int(w.Fd()), []unix.Iovec{{Base: &m[0], Len: uint64(page)}}, 0); err != nil || n != page {
		t.Fatalf("vmsplice: %d, %v", n, err)
	}
	// A shared mapping of a writable memfd is a writable one to the
	// kernel (it refuses the seal for it at once); the pipe's reference
	// outlives it.
	if err := unix.Munmap(m); err != nil {
		t.Fatal(err)
	}
	return f, func() {
		if _, err := unix.Read(p[0], make([]byte, page)); err != nil {
			t.Errorf("drain the pipe: %v", err)
		}
	}
}

// TestSealPinnedPage: the kernel refuses to seal a memfd one of whose
// pages is pinned (EBUSY); seal tries again, and succeeds once the pin is
// gone; a pin that stays is ErrStateBusy.
func TestSealPinnedPage(t *testing.T) {
	t.Run("released", func(t *testing.T) {
		f, drain := pinnedMemfd(t)
		tries := 0
		err := sealRetrying(func() error {
			tries++
			_, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL)
			return err
		}, func(time.Duration) { drain() })
		if err != nil || tries != 2 {
			t.Fatalf("seal after the pin went: %v after %d tries, want success at the 2nd", err, tries)
		}
		if seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0); err != nil || seals&unix.F_SEAL_WRITE == 0 {
			t.Errorf("seals %#x, %v: not sealed for writing", seals, err)
		}
		if _, err := f.WriteAt([]byte("y"), 0); !errors.Is(err, unix.EPERM) {
			t.Errorf("write to the sealed memfd: %v, want EPERM", err)
		}
	})
	t.Run("held", func(t *testing.T) {
		f, _ := pinnedMemfd(t)
		if err := seal(f); !errors.Is(err, ErrStateBusy) || !errors.Is(err, ErrState) {
			t.Fatalf("seal of a memfd pinned throughout: %v, want ErrStateBusy", err)
		}
	})
}
