package config

import (
	"fmt"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/nsbox/nsbox/daemon/config/internal/tomlval"
	"github.com/nsbox/nsbox/daemon/volume"
)

// VolumesConfig is [volumes]: how named volumes are kept on disk.
type VolumesConfig struct {
	// OwnerID is the uid and gid that own volumes' files on disk
	// (volume.DefaultOwnerID, no host account's, unless chosen); each
	// sandbox sees them as uid 1000. Volumes another id owns are moved
	// to it at start.
	OwnerID int
}

func defaultVolumesConfig() VolumesConfig {
	return VolumesConfig{OwnerID: volume.DefaultOwnerID}
}

// setVolumesKey stores a key of [volumes].
func (cfg *Config) setVolumesKey(key string, v *unstable.Node) error {
	switch key {
	case "owner_id":
		n, err := tomlval.Int(v)
		if err != nil {
			return err
		}
		if n < 0 || n > 1<<32 {
			return fmt.Errorf("%d: want 1 to %d", n, uint32(1<<32-2))
		}
		if err := volume.ValidOwnerID(int(n)); err != nil {
			return err
		}
		cfg.Volumes.OwnerID = int(n)
		return nil
	}
	return fmt.Errorf("unknown key; [volumes] has owner_id")
}
