// Package frame is the framing nsbox speaks with its Python processes (the
// runner and the zygote) over their sockets: a 4-byte big-endian length,
// then that many bytes of JSON.
package frame

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ErrTooLarge reports a frame whose length is above the reader's maximum.
var ErrTooLarge = errors.New("frame too large")

// Append appends v's frame to b.
func Append(b []byte, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...), nil
}

// Write writes v as one frame, in one write.
func Write(w io.Writer, v any) error {
	b, err := Append(nil, v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Read reads one frame's payload, refusing lengths above max.
func Read(r io.Reader, max int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(max) {
		return nil, fmt.Errorf("%w: %d bytes (max %d)", ErrTooLarge, n, max)
	}
	if n <= eager {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return b, nil
	}
	// The length is the peer's claim (sandboxed code writes it): memory
	// grows with the bytes that come, not with the claim.
	var buf bytes.Buffer
	buf.Grow(eager)
	if m, err := io.CopyN(&buf, r, int64(n)); m < int64(n) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf.Bytes(), nil
}

// eager is the largest frame Read allocates whole before reading it.
const eager = 64 << 10

// SendFiles writes all of msg to the Unix socket sock, with the fds of
// files attached (SCM_RIGHTS) to its first bytes.
func SendFiles(sock *os.File, msg []byte, files ...*os.File) error {
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	n, err := unix.SendmsgN(int(sock.Fd()), msg, unix.UnixRights(fds...), nil, 0)
	for err == nil && n < len(msg) {
		var m int
		m, err = sock.Write(msg[n:])
		n += m
	}
	return err
}
