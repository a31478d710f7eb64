package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/ardx-dev/ardx/kv"
)

// globalConfig holds the flags every subcommand accepts.
type globalConfig struct {
	dataDir      string
	logFormat    string
	logLevel     string
	allowPrivate bool
	resolve      []string // DOMAIN=127.0.0.1:PORT, like curl --resolve
	metricsAddr  string   // "" = /metrics on each service's listener; "off"; or host:port
}

// cli carries what every command needs: config, environment and streams.
type cli struct {
	global globalConfig
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
	// started is what the start-up banner shows, filled as services start.
	started startupInfo
	// db is the store the started services share, for the admin socket.
	db *kv.DB
}

func newRootCmd(getenv func(string) string, stdout, stderr io.Writer) *cobra.Command {
	c := &cli{getenv: getenv, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "ardx",
		Short:         "An ARD registry and an x402 payment facilitator in one binary",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnv(cmd, getenv)
		},
	}
	root.SetVersionTemplate("ardx {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&c.global.dataDir, "data", "./ardx-data", "data directory (bbolt file ardx.db and the index/ folder)")
	pf.StringVar(&c.global.logFormat, "log-format", "auto", "log format: text, json, or auto (text on a terminal, JSON otherwise)")
	pf.StringVar(&c.global.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	pf.BoolVar(&c.global.allowPrivate, "unsafe-allow-private-fetch", false,
		"DANGEROUS, for tests and local development only: let outbound fetches reach loopback and private addresses")
	pf.StringArrayVar(&c.global.resolve, "resolve", nil,
		"for tests and local development: DOMAIN=127.0.0.1:PORT sends that domain's fetches to a loopback server over plain http (repeatable, like curl --resolve); implies --unsafe-allow-private-fetch for that domain alone")

	root.AddCommand(
		c.serveCmd(),
		c.registryCmd(),
		c.ingestCmd(),
		c.reindexCmd(),
		c.crawlCmd(),
		c.benchCmd(),
		c.facilitatorCmd(),
		c.payCmd(),
		c.backupCmd(),
		c.restoreCmd(),
		c.versionCmd(),
	)
	return root
}

// applyEnv fills every flag not given on the command line from ARDX_<FLAG>
// (upper case, dashes as underscores). Repeatable flags take a comma-separated
// list.
func applyEnv(cmd *cobra.Command, getenv func(string) string) error {
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		name := "ARDX_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v := getenv(name)
		if v == "" {
			return
		}
		values := []string{v}
		if _, ok := f.Value.(pflag.SliceValue); ok {
			values = splitList(v)
		}
		for _, s := range values {
			if err := f.Value.Set(s); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				return
			}
		}
		f.Changed = true
	})
	return errors.Join(errs...)
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '\n' }) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// logger builds the one logger of the process.
func (c *cli) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.global.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	format := c.global.logFormat
	if format == "auto" {
		format = "json"
		if f, ok := c.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			format = "text"
		}
	}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(c.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(c.stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not text, json or auto", c.global.logFormat)
}

// serverFlags are the flags of the commands that run services.
func (c *cli) serverFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.global.metricsAddr, "metrics-addr", "",
		"serve Prometheus /metrics on this address instead of on each service's listener; off disables /metrics")
}

func (c *cli) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(c.stdout, "ardx", version)
			return nil
		},
	}
}

// belowErrorAsDebug lowers info and warning records to debug: while a
// progress bar is on the terminal their lines would break it up, and the
// summary printed after the bar lists each source's errors, rejections and
// warnings. Errors pass unchanged.
type belowErrorAsDebug struct{ slog.Handler }

func (h belowErrorAsDebug) Enabled(ctx context.Context, l slog.Level) bool {
	if l < slog.LevelError {
		l = slog.LevelDebug
	}
	return h.Handler.Enabled(ctx, l)
}

func (h belowErrorAsDebug) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelError {
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

func (h belowErrorAsDebug) WithAttrs(as []slog.Attr) slog.Handler {
	return belowErrorAsDebug{h.Handler.WithAttrs(as)}
}

func (h belowErrorAsDebug) WithGroup(name string) slog.Handler {
	return belowErrorAsDebug{h.Handler.WithGroup(name)}
}
