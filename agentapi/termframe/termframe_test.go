package termframe

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	frames := []struct {
		typ byte
		p   []byte
	}{{'i', []byte("ls\r")}, {'r', Size(40, 120)}, {'s', Signal(2)}, {'o', nil}}
	for _, f := range frames {
		if err := Write(&buf, f.typ, f.p); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range frames {
		typ, p, err := Read(&buf)
		if err != nil || typ != f.typ || !bytes.Equal(p, f.p) && len(p)+len(f.p) > 0 {
			t.Fatalf("Read: %q %q %v, want %q %q", typ, p, err, f.typ, f.p)
		}
	}
	if _, _, err := Read(&buf); !errors.Is(err, io.EOF) {
		t.Fatalf("at the end: %v, want EOF", err)
	}
	if rows, cols, err := ParseSize(Size(40, 120)); rows != 40 || cols != 120 || err != nil {
		t.Errorf("ParseSize: %d %d %v", rows, cols, err)
	}
	if sig, err := ParseSignal(Signal(15)); sig != 15 || err != nil {
		t.Errorf("ParseSignal: %d %v", sig, err)
	}
}

func TestRefused(t *testing.T) {
	if err := Write(io.Discard, 'i', make([]byte, MaxPayload+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Write past MaxPayload: %v", err)
	}
	if _, _, err := Read(bytes.NewReader([]byte{'i', 0xff, 0xff, 0xff, 0xff})); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Read of a 4 GiB length: %v", err)
	}
	if _, _, err := Read(bytes.NewReader([]byte{'i', 0, 0, 0, 9, 'a'})); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a cut payload: %v", err)
	}
	if _, _, err := ParseSize([]byte{1, 2, 3}); err == nil {
		t.Error("ParseSize of 3 bytes")
	}
	if _, err := ParseSignal(nil); err == nil {
		t.Error("ParseSignal of nothing")
	}
}

// FuzzRead: a client's bytes never make Read allocate past MaxPayload or
// panic.
func FuzzRead(f *testing.F) {
	f.Add([]byte{'i', 0, 0, 0, 2, 'l', 's'})
	f.Add([]byte{'r', 0, 0, 0, 4, 0, 40, 0, 120})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for {
			_, p, err := Read(r)
			if err != nil {
				return
			}
			if len(p) > MaxPayload {
				t.Fatalf("a payload of %d bytes", len(p))
			}
		}
	})
}
