package procs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The agent's file operations: paths are absolute paths of the sandbox,
// resolved by the agent inside it, as the sandbox's user (see agent.py):
// the host resolves nothing, so no path can name a host file.

// FileError is a file operation's failure inside the sandbox: the errno
// it failed with (errors.Is(err, fs.ErrNotExist) and the like work), and
// its text.
type FileError struct {
	Op, Path string
	Errno    syscall.Errno
	Msg      string // the agent's words ("not a regular file"), else the errno's
}

func (e *FileError) Error() string {
	msg := e.Msg
	if msg == "" {
		msg = e.Errno.Error()
	}
	return e.Op + " " + e.Path + ": " + msg
}
func (e *FileError) Unwrap() error { return e.Errno }

// FileEntry is one entry as the sandbox sees it (lstat's).
type FileEntry struct {
	Path  string `json:"path"`
	Name  string `json:"name"`
	Size  int64  `json:"size"`
	Mode  uint32 `json:"mode"` // st_mode: type and permission bits
	MTime int64  `json:"mtime"`
	Owner string `json:"owner"`
	Group string `json:"group"`
	// Link is a symlink's target as written; Target is where it leads
	// (every link followed, as realpath) and TargetMode that entry's
	// st_mode, both empty when it does not resolve.
	Link       string `json:"link,omitempty"`
	Target     string `json:"target,omitempty"`
	TargetMode uint32 `json:"target_mode,omitempty"`
	// Meta is the entry's file metadata (meta.go), nil when it has none.
	Meta map[string]string `json:"meta,omitempty"`
}

// ModTime is the entry's modification time.
func (e *FileEntry) ModTime() time.Time { return time.Unix(0, e.MTime) }

// IsDir, IsSymlink and IsRegular read the entry's type.
func (e *FileEntry) IsDir() bool     { return e.Mode&unix.S_IFMT == unix.S_IFDIR }
func (e *FileEntry) IsSymlink() bool { return e.Mode&unix.S_IFMT == unix.S_IFLNK }
func (e *FileEntry) IsRegular() bool { return e.Mode&unix.S_IFMT == unix.S_IFREG }

// fileCall runs one file operation and turns the agent's errno into a
// FileError.
func (a *Agent) fileCall(ctx context.Context, req request) (*message, error) {
	rep, err := a.call(ctx, req, &call{})
	if err != nil {
		return nil, err
	}
	if rep.Error != "" {
		return nil, fileError(req, rep)
	}
	return rep, nil
}

// fileError is the error a file operation's reply carries.
func fileError(req request, rep *message) error {
	errno, ok := errnoByName[rep.Kind]
	if !ok {
		return fmt.Errorf("%s %s: %s", req.Op[1:], req.Path, rep.Error)
	}
	return &FileError{Op: req.Op[1:], Path: req.Path, Errno: errno, Msg: strings.ToLower(rep.Error)}
}

// Stat describes the entry at path (a symlink itself, with where it leads).
func (a *Agent) Stat(ctx context.Context, path string) (*FileEntry, error) {
	rep, err := a.fileCall(ctx, request{Op: "fstat", Path: path})
	if err != nil {
		return nil, err
	}
	if rep.Entry == nil {
		return nil, fmt.Errorf("%w: stat without an entry", ErrProtocol)
	}
	return rep.Entry, nil
}

// ListDir lists the directory at path to depth levels (1: its entries),
// at most 10,000 entries (E2BIG past them).
func (a *Agent) ListDir(ctx context.Context, path string, depth int) ([]FileEntry, error) {
	rep, err := a.fileCall(ctx, request{Op: "flist", Path: path, Depth: depth})
	if err != nil {
		return nil, err
	}
	return rep.Entries, nil
}

// MakeDir makes a directory and its parents; created is false when one
// was there already.
func (a *Agent) MakeDir(ctx context.Context, path string) (created bool, err error) {
	rep, err := a.fileCall(ctx, request{Op: "fmkdir", Path: path})
	if err != nil {
		return false, err
	}
	return rep.Created, nil
}

// Rename renames from to to (to's parents made), replacing what is there
// as rename(2) does.
func (a *Agent) Rename(ctx context.Context, from, to string) error {
	_, err := a.fileCall(ctx, request{Op: "frename", Path: from, To: to})
	return err
}

// RemoveAll removes path and everything under it (a symlink itself); a
// missing path is no error.
func (a *Agent) RemoveAll(ctx context.Context, path string) error {
	_, err := a.fileCall(ctx, request{Op: "fremove", Path: path})
	return err
}

// File is a regular file the agent holds open, read or written in
// chunks; Close it. ctx, given at open, bounds every call.
type File struct {
	a    *Agent
	ctx  context.Context
	fh   uint64
	path string
	size int64
	eof  bool
	buf  []byte
}

// Open opens the regular file at path to read it; anything else (a
// directory, a FIFO, a device) is refused without blocking.
func (a *Agent) Open(ctx context.Context, path string) (*File, error) {
	return a.open(ctx, path, false)
}

// Create opens the regular file at path to write it, made (mode 0666 less
// the umask, parents made) or truncated.
func (a *Agent) Create(ctx context.Context, path string) (*File, error) {
	return a.open(ctx, path, true)
}

func (a *Agent) open(ctx context.Context, path string, write bool) (*File, error) {
	rep, err := a.fileCall(ctx, request{Op: "fopen", Path: path, Write: write})
	if err != nil {
		return nil, err
	}
	return &File{a: a, ctx: ctx, fh: rep.Fh, path: path, size: rep.Size}, nil
}

// Size is the file's size when it was opened.
func (f *File) Size() int64 { return f.size }

func (f *File) Read(p []byte) (int, error) {
	for len(f.buf) == 0 {
		if f.eof {
			return 0, io.EOF
		}
		rep, err := f.a.fileCall(f.ctx, request{Op: "fread", Fh: f.fh, Path: f.path})
		if err != nil {
			return 0, err
		}
		f.buf, f.eof = rep.Data, len(rep.Data) == 0
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

// writeChunk bounds the data of one write frame (the agent takes frames
// of up to 16 MiB, base64 included).
const writeChunk = 1 << 20

func (f *File) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n := min(len(p)-done, writeChunk)
		if _, err := f.a.fileCall(f.ctx, request{Op: "fwrite", Fh: f.fh, Path: f.path, Data: p[done : done+n]}); err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// Close closes the agent's file; with a ctx that ended, it still closes
// it (the agent holds at most 64).
func (f *File) Close() error {
	ctx := f.ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
	}
	_, err := f.a.fileCall(ctx, request{Op: "fclose", Fh: f.fh, Path: f.path})
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// errnoByName reads the agent's errno names (Python's errno.errorcode).
var errnoByName = func() map[string]syscall.Errno {
	m := map[string]syscall.Errno{}
	for e := syscall.Errno(1); e < 134; e++ {
		if name := unix.ErrnoName(e); name != "" {
			m[name] = e
		}
	}
	return m
}()
