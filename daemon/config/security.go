package config

import (
	"fmt"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/nsbox/nsbox/container/sandboxinit"
	"github.com/nsbox/nsbox/daemon/config/internal/tomlval"
)

// SecurityConfig is [security]: the layers under the namespaces.
type SecurityConfig struct {
	// Landlock is "auto" (Landlock in every sandbox where the kernel has
	// it; without, a warning at start and sandboxes run), "required" (the
	// daemon refuses to start without it) or "off".
	Landlock string
}

func defaultSecurityConfig() SecurityConfig {
	return SecurityConfig{Landlock: sandboxinit.LandlockAuto}
}

// setSecurityKey stores a key of [security].
func (cfg *Config) setSecurityKey(key string, v *unstable.Node) error {
	switch key {
	case "landlock":
		s, err := tomlval.String(v)
		if err != nil {
			return err
		}
		switch s {
		case sandboxinit.LandlockAuto, sandboxinit.LandlockRequired, sandboxinit.LandlockOff:
			cfg.Security.Landlock = s
			return nil
		}
		return fmt.Errorf("%q: want \"auto\", \"required\" or \"off\"", s)
	}
	return fmt.Errorf("unknown key; [security] has landlock")
}
