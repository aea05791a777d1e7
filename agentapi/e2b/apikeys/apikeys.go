// Package apikeys holds the E2B endpoint's API keys: the keys file, a
// request's key matched in constant time, and the fingerprint a sandbox's
// record keeps instead of the key.
package apikeys

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// keyPattern is the form the SDKs accept without E2B_VALIDATE_API_KEY=false.
var keyPattern = regexp.MustCompile(`^e2b_[0-9a-f]{16,}$`)

// Keys are the API keys of the endpoint. A sandbox belongs to the key that
// created it: another key neither sees it nor reaches it.
type Keys struct {
	keys [][]byte
}

// New checks keys and returns them; each must be e2b_ and at least 16
// lowercase hex digits.
func New(keys []string) (*Keys, error) {
	if len(keys) == 0 {
		return nil, errors.New("no API keys: the keys file needs one e2b_HEX key per line")
	}
	k := &Keys{}
	for i, s := range keys {
		if !keyPattern.MatchString(s) {
			return nil, fmt.Errorf("key %d: not of the form e2b_ and at least 16 lowercase hex digits, which the E2B SDKs require (make one with: echo e2b_$(openssl rand -hex 20))", i+1)
		}
		k.keys = append(k.keys, []byte(s))
	}
	return k, nil
}

// Load reads a keys file: one key per line, blank lines and lines
// starting with # ignored. The file must be a regular file owned by root
// that neither group nor others can read or write: the keys are bearer
// credentials for every sandbox they create.
func Load(path string) (*Keys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("e2b keys file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("e2b keys file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("e2b keys file %s: not a regular file", path)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 {
		return nil, fmt.Errorf("e2b keys file %s: owned by uid %d, must be owned by root (chown root: %s)", path, sys.Uid, path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("e2b keys file %s: mode %04o lets others read it; chmod 600 %s", path, st.Mode().Perm(), path)
	}
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		keys = append(keys, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("e2b keys file %s: %w", path, err)
	}
	k, err := New(keys)
	if err != nil {
		return nil, fmt.Errorf("e2b keys file %s: %w", path, err)
	}
	return k, nil
}

// Match returns the index of key, or -1. Every key is compared in constant
// time.
func (k *Keys) Match(key string) int {
	found := -1
	b := []byte(key)
	for i, want := range k.keys {
		if len(b) == len(want) && subtle.ConstantTimeCompare(b, want) == 1 {
			found = i
		}
	}
	return found
}

// Fingerprint is key i's SHA-256 in hex: what a paused sandbox's record
// keeps of its owner.
func (k *Keys) Fingerprint(i int) string {
	sum := sha256.Sum256(k.keys[i])
	return hex.EncodeToString(sum[:])
}

// ByFingerprint is the index of the key with that fingerprint, or -1.
func (k *Keys) ByFingerprint(fp string) int {
	for i := range k.keys {
		if EqualToken(fp, k.Fingerprint(i)) {
			return i
		}
	}
	return -1
}

// EqualToken compares two secrets in constant time; an empty one never
// matches.
func EqualToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// SignedURL checks a signed /files URL as the SDKs make it (downloadUrl,
// uploadUrl): signature = "v1_" + base64(sha256(
// "PATH:OPERATION:USER:TOKEN[:EXPIRATION]")) without padding. signed: token
// made it; expired: its signature_expiration (seconds
// since the epoch) passed, which envd tells apart.
func SignedURL(r *http.Request, token string, now time.Time) (signed, expired bool) {
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return false, false
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	raw := q.Get("path") + ":" + op + ":" + q.Get("username") + ":" + token
	if exp := q.Get("signature_expiration"); exp != "" {
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil {
			return false, false
		}
		raw += ":" + exp
		expired = n < now.Unix()
	}
	sum := sha256.Sum256([]byte(raw))
	want := "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
	return EqualToken(sig, want), expired
}
