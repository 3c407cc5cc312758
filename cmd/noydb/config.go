package main

import (
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// setting is one line of 'noydb config': a value and where it came from.
type setting struct {
	Name   string `json:"-"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

// configCmd shows the settings a command would use, without opening
// anything: no secret is needed.
func (a *app) configCmd() *cobra.Command {
	show := &cobra.Command{
		Use:   "config",
		Short: "Show the store, vault, user and state folder commands use, and why",
		Long: `Config prints the settings the other commands would use with the same flags
and environment, and where each came from: a flag, an environment variable,
the config file, or the default. It opens nothing and needs no secret.
'noydb config set KEY VALUE' and 'noydb config unset KEY' change the config
file (keys: store, hub, vault, user, state-dir, wait).

The user shown as "the vault's only user" is settled when a command opens
the vault; a new vault's first user is $USER.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.configErr != nil {
				return a.configErr
			}
			store := setting{"store", a.storeSpec, a.source("store", envStore, "default: the user data folder")}
			if spec, err := a.parsedStore(); err != nil {
				store.Value = "(none: " + err.Error() + ")"
			} else {
				store.Value = spec.String()
			}
			hub := setting{"hub", "(none)", a.source("hub", envHub, "default: no hub")}
			if spec, ok, err := a.parsedHub(); err != nil {
				hub.Value = "(none: " + err.Error() + ")"
			} else if ok {
				hub.Value = spec.String()
			}
			user := setting{"user", a.user, a.source("user", envUser, "")}
			if a.user == "" {
				user.Value, user.Source = "the vault's only user", "default; a new vault's first user is $USER"
			}
			state := setting{"state-dir", "", a.source("state-dir", envStateDir, "default: the user state folder")}
			if dir, err := a.stateDir(); err != nil {
				state.Value = "(none: " + err.Error() + ")"
			} else if dir == "" {
				state.Value = "(none: this store keeps no state)"
			} else {
				state.Value = dir
			}
			all := []setting{
				store,
				hub,
				{"vault", a.vaultName, a.source("vault", envVault, "default")},
				user,
				state,
				{"wait", a.wait.String(), a.source("wait", "", "default")},
			}
			if a.json {
				obj := make(map[string]setting, len(all))
				for _, s := range all {
					obj[s.Name] = s
				}
				return a.printJSON(obj)
			}
			tw := tabwriter.NewWriter(a.io.out, 0, 0, 2, ' ', 0)
			for _, s := range all {
				fmt.Fprintf(tw, "%s\t%s\t(%s)\n", s.Name, s.Value, s.Source)
			}
			return tw.Flush()
		},
	}
	set := &cobra.Command{
		Use:   "set KEY VALUE",
		Short: "Keep a default for a global flag in the config file",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.setConfig(args[0], args[1])
		},
	}
	unset := &cobra.Command{
		Use:   "unset KEY",
		Short: "Remove a default from the config file",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.setConfig(args[0], "")
		},
	}
	show.AddCommand(set, unset)
	return show
}

// setConfig sets (or, with an empty value, removes) key in the config file
// and confirms it in one line.
func (a *app) setConfig(key, value string) error {
	if value != "" || !slices.Contains(configKeys, key) {
		if err := checkSetting(key, value); err != nil {
			return usagef("%v", err)
		}
	}
	path, err := a.configPath()
	if err != nil {
		return fmt.Errorf("no config file: %w (set $%s)", err, envConfig)
	}
	cf := configFile{path: path}
	if err := cf.set(key, value); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	shown := value
	if key == "store" || key == "hub" {
		shown = redactLocation(value) // a PostgreSQL URL's password stays in the file
	}
	if a.json {
		return a.printJSON(map[string]string{"file": path, "key": key, "value": shown})
	}
	if value == "" {
		_, err = fmt.Fprintf(a.io.out, "removed %s from %s\n", key, path)
	} else {
		_, err = fmt.Fprintf(a.io.out, "set %s = %s in %s\n", key, shown, path)
	}
	return err
}

// source says where a global flag's value came from: the flag, its
// environment variable, or the default.
func (a *app) source(flag, env, def string) string {
	if a.flags != nil && a.flags.Changed(flag) {
		return "--" + flag
	}
	if env != "" && a.env(env) != "" {
		return "$" + env
	}
	if a.config.values[flag] != "" {
		return "config file " + a.config.path
	}
	if def == "" {
		return "default"
	}
	return def
}
