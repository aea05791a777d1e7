// Package termframe reads and writes the frames of a terminal's
// connection (agentapi.TerminalProtocol): a type byte, a 4-byte
// big-endian payload length, the payload.
package termframe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MaxPayload bounds one frame's payload; a longer one is an error.
const MaxPayload = 1 << 20

// ErrTooLarge: a frame's length is past MaxPayload.
var ErrTooLarge = errors.New("terminal frame larger than 1 MiB")

// Write writes one frame.
func Write(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxPayload {
		return ErrTooLarge
	}
	b := make([]byte, 5+len(payload))
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:5], uint32(len(payload)))
	copy(b[5:], payload)
	_, err := w.Write(b)
	return err
}

// Read reads one frame; io.EOF only at a frame's boundary.
func Read(r io.Reader) (typ byte, payload []byte, err error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("terminal frame header: %w", err)
		}
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > MaxPayload {
		return 0, nil, ErrTooLarge
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, fmt.Errorf("terminal frame payload: %w", io.ErrUnexpectedEOF)
	}
	return h[0], payload, nil
}

// Size is a FrameResize payload.
func Size(rows, cols uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, rows), cols)
}

// ParseSize reads a FrameResize payload.
func ParseSize(p []byte) (rows, cols uint16, err error) {
	if len(p) != 4 {
		return 0, 0, fmt.Errorf("a resize frame of %d bytes, want 4", len(p))
	}
	return binary.BigEndian.Uint16(p), binary.BigEndian.Uint16(p[2:]), nil
}

// Signal is a FrameSignal payload.
func Signal(sig int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(sig)) }

// ParseSignal reads a FrameSignal payload.
func ParseSignal(p []byte) (int, error) {
	if len(p) != 4 {
		return 0, fmt.Errorf("a signal frame of %d bytes, want 4", len(p))
	}
	return int(binary.BigEndian.Uint32(p)), nil
}
