package config

import (
	"fmt"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/nsbox/nsbox/daemon/config/internal/tomlval"
	"github.com/nsbox/nsbox/daemon/lang"
	"github.com/nsbox/nsbox/rootfs"
)

// Language is [languages.NAME]: an operator-declared one-shot language.
type Language = lang.Declared

// language returns the declared language named name, adding it if needed.
// The pointer is valid until the next call.
func (cfg *Config) language(name string) *Language {
	for i := range cfg.Languages {
		if cfg.Languages[i].Name == name {
			return &cfg.Languages[i]
		}
	}
	cfg.Languages = append(cfg.Languages, Language{Name: name})
	return &cfg.Languages[len(cfg.Languages)-1]
}

// setLanguageKey stores a key of [languages.NAME]: argv (the command,
// "{file}" standing for the program's path; without it the program comes
// on stdin), rootfs (where it exists; empty: every rootfs) and extension.
func (cfg *Config) setLanguageKey(name, key string, v *unstable.Node) error {
	if err := lang.ValidName(name); err != nil {
		return err
	}
	l := cfg.language(name)
	switch key {
	case "argv":
		argv, err := tomlval.Strings(v, `["Rscript", "{file}"]`)
		if err != nil {
			return err
		}
		l.Argv = argv
	case "rootfs":
		names, err := tomlval.Strings(v, `["default"]`)
		if err != nil {
			return err
		}
		for _, r := range names {
			if err := rootfs.ValidName(r); err != nil {
				return err
			}
		}
		l.Rootfs = names
	case "extension":
		ext, err := tomlval.String(v)
		if err != nil {
			return err
		}
		l.Extension = ext
	default:
		return fmt.Errorf("unknown key; [languages.%s] has argv, rootfs and extension", name)
	}
	return nil
}

// checkLanguages finds what is wrong with the declared languages as a
// whole (each key was checked as it was read).
func (cfg *Config) checkLanguages(bad func(key, format string, args ...any)) {
	for _, l := range cfg.Languages {
		if err := l.Check(); err != nil {
			bad("languages."+l.Name, "%v", err)
		}
	}
}
