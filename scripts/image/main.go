// Command image writes nsbox's container image as an OCI archive, without
// a container engine: the two static binaries (nsbox, nsbox-init) on an
// empty base, `nsbox daemon` as the command, the OCI labels. The same
// inputs give the same bytes, so the same digest: file times, the image's
// creation time and every tar header come from --created (by default
// SOURCE_DATE_EPOCH, else the Unix epoch), never from the clock.
//
// `make image` runs it; `podman load -i`, `skopeo copy oci-archive:…` and
// `ctr images import` (what `kind load image-archive` runs) read its output.
//
//	go run ./scripts/image -o bin/nsbox-image.tar -version v1.2.3
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.nsbox, "nsbox", "bin/nsbox", "the static nsbox binary")
	flag.StringVar(&o.init, "init", "bin/nsbox-init", "the static sandbox init binary")
	flag.StringVar(&o.out, "o", "bin/nsbox-image.tar", "the OCI archive to write")
	flag.StringVar(&o.name, "name", "nsbox", "the image's repository name (the reference is NAME:VERSION)")
	flag.StringVar(&o.version, "version", "dev", "the image's version: its tag and org.opencontainers.image.version")
	flag.StringVar(&o.revision, "revision", "", "the source commit (org.opencontainers.image.revision)")
	flag.StringVar(&o.source, "source", "https://github.com/nsbox/nsbox", "the source repository (org.opencontainers.image.source)")
	created := flag.String("created", "", "the image's creation time, RFC 3339 or Unix seconds (default: SOURCE_DATE_EPOCH, else 1970-01-01)")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected argument %q: every input is a flag (see -h)", flag.Arg(0)))
	}
	var err error
	if o.created, err = parseCreated(*created, os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
		fail(err)
	}
	digest, size, err := write(o)
	if err != nil {
		fail(err)
	}
	fmt.Printf("image: %s  %s:%s  %s  %.1f MiB compressed\n", o.out, o.name, o.version, digest, float64(size)/(1<<20))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}

// parseCreated reads --created, else SOURCE_DATE_EPOCH, else the epoch.
func parseCreated(flagValue, env string) (time.Time, error) {
	v, from := flagValue, "--created"
	if v == "" {
		v, from = env, "SOURCE_DATE_EPOCH"
	}
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Unix(secs, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: want Unix seconds or an RFC 3339 time (2026-01-02T15:04:05Z)", from, v)
	}
	return t.UTC(), nil
}
