package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
)

// FuzzRead feeds Read a hostile stream (the runner's and the agent's
// channels are written by sandboxed code): it must return each frame's
// payload whole, never one above max, and stop with an error at the
// first frame it cannot read, without panicking.
func FuzzRead(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x02{}"), 16)
	f.Add([]byte("\x00\x00\x00\x02{}\x00\x00\x00\x05[1,2]"), 16)
	f.Add([]byte("\xff\xff\xff\xff"), 16)
	f.Add([]byte("\x00\x00\x10\x00abc"), 1<<20)
	f.Add([]byte("\x00\x00"), 16)
	f.Fuzz(func(t *testing.T, stream []byte, max int) {
		if max < 0 {
			max = -max
		}
		max %= 1 << 24
		r := bytes.NewReader(stream)
		for {
			off := len(stream) - r.Len()
			b, err := Read(r, max)
			if err != nil {
				if off == len(stream) && err != io.EOF {
					t.Fatalf("at the end of the stream: %v, want io.EOF", err)
				}
				if errors.Is(err, ErrTooLarge) && binary.BigEndian.Uint32(stream[off:]) <= uint32(max) {
					t.Fatalf("ErrTooLarge for a length within %d", max)
				}
				return
			}
			n := int(binary.BigEndian.Uint32(stream[off:]))
			if n > max || len(b) != n || !bytes.Equal(b, stream[off+4:off+4+n]) {
				t.Fatalf("frame at %d: %d bytes read for a length of %d (max %d)", off, len(b), n, max)
			}
		}
	})
}

// TestReadClaimedLengthNotAllocated: a frame that claims max bytes and
// sends a few allocates about what came, not max (a hostile runner would
// otherwise make the daemon allocate 256 MiB per sandbox with 4 bytes).
func TestReadClaimedLengthNotAllocated(t *testing.T) {
	stream := []byte("\x0f\xff\xff\xffabc")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 8; i++ {
		if _, err := Read(bytes.NewReader(stream), 1<<28); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("Read: %v, want io.ErrUnexpectedEOF", err)
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 8<<20 {
		t.Fatalf("8 frames claiming 256 MiB and sending 3 bytes allocated %d bytes", d)
	}
}
