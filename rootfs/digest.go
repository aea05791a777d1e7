package rootfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// treeDigest hashes the tree's file list (path, type, permissions, owner,
// symlink target) and the contents of its regular files, in lexical order.
// Timestamps are left out, so the same files give the same digest. It also
// returns the tree's size: regular file bytes, each inode counted once.
func treeDigest(ctx context.Context, tree string) (digest string, size int64, err error) {
	h := sha256.New()
	seen := map[[2]uint64]bool{}
	n := 0
	err = filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		rel, _ := filepath.Rel(tree, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		var uid, gid uint32
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			uid, gid = st.Uid, st.Gid
			if info.Mode().IsRegular() {
				key := [2]uint64{st.Dev, st.Ino}
				if !seen[key] {
					seen[key] = true
					size += info.Size()
				}
			}
		}
		fmt.Fprintf(h, "%s\x00%v\x00%d:%d\x00", rel, info.Mode(), uid, gid)
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			io.WriteString(h, target)
		case info.Mode().IsRegular():
			sum, err := fileSHA256(p)
			if err != nil {
				return err
			}
			io.WriteString(h, sum)
		}
		h.Write([]byte{'\n'})
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), size, nil
}

func fileSHA256(p string) (string, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
