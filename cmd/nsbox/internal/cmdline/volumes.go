package cmdline

import (
	"errors"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/nsbox/nsbox/agentapi"
)

// MountFlags are --volume and --dataset, for runs and sessions through the
// daemon.
func MountFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "volume", Usage: "mount the daemon's named volume `NAME[:/mnt/PATH][:ro]` (default /mnt/NAME, read-write); repeatable"},
		&cli.StringSliceFlag{Name: "dataset", Usage: "mount the operator's read-only dataset `NAME` at /mnt/NAME; repeatable"},
	}
}

// ReadMounts reads --volume and --dataset.
func ReadMounts(c *cli.Context) ([]agentapi.VolumeMount, []string, error) {
	var vols []agentapi.VolumeMount
	for _, s := range c.StringSlice("volume") {
		v, err := ParseVolume(s)
		if err != nil {
			return nil, nil, UsageError(c, "--volume %q: %v", s, err)
		}
		vols = append(vols, v)
	}
	return vols, c.StringSlice("dataset"), nil
}

// ParseVolume reads NAME, NAME:ro, NAME:/mnt/PATH or NAME:/mnt/PATH:ro.
func ParseVolume(s string) (agentapi.VolumeMount, error) {
	parts := strings.Split(s, ":")
	v := agentapi.VolumeMount{Name: parts[0]}
	if len(parts) > 1 && parts[len(parts)-1] == "ro" {
		v.ReadOnly = true
		parts = parts[:len(parts)-1]
	}
	switch len(parts) {
	case 1:
	case 2:
		v.Path = parts[1]
	default:
		return v, errors.New("use NAME[:/mnt/PATH][:ro]")
	}
	if v.Name == "" {
		return v, errors.New("no volume name; use NAME[:/mnt/PATH][:ro]")
	}
	return v, nil
}
