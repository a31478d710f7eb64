package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/web"
)

// adminSocketName is the Unix socket a running service listens on inside
// its data dir, mode 0600: whoever may read the data dir may take a backup
// through it, nobody else. bbolt's file lock keeps a second process out of
// ardx.db, so `ardx backup` asks the running process for the copy.
const adminSocketName = "admin.sock"

// backupBytesTrailer carries the size of a backup after its body, so a copy
// cut short is never taken for a whole one.
const backupBytesTrailer = "Ardx-Backup-Bytes"

func (c *cli) backupCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "backup OUT",
		Short: "Write a consistent copy of ardx.db to OUT, also while the service runs",
		Long: `Backup writes a consistent copy of the data dir's ardx.db (one bbolt read
transaction, Tx.WriteTo) to OUT. When a service is running on the data dir it
holds the file's lock, and the copy is taken by that process through the
admin socket in the data dir. The search index is not copied: it is rebuilt
from ardx.db (ardx restore does so).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := args[0]
			path := filepath.Join(c.global.dataDir, kv.FileName)
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("no store to back up: %w", err)
			}
			tmp := out + ".partial"
			f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			n, how, err := c.writeBackup(cmd.Context(), f)
			if err == nil {
				err = f.Sync()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Rename(tmp, out)
			}
			if err != nil {
				os.Remove(tmp)
				return err
			}
			fmt.Fprintf(c.stdout, "backed up %s (%d bytes, %s) to %s\n", path, n, how, out)
			return nil
		},
	}
}

// writeBackup copies the store to w: directly when no process holds it,
// else through the running service's admin socket.
func (c *cli) writeBackup(ctx context.Context, w io.Writer) (int64, string, error) {
	db, err := kv.Open(c.global.dataDir, kv.Options{Timeout: 200 * time.Millisecond})
	if err == nil {
		defer db.Close()
		n, err := db.WriteBackup(w)
		return n, "no service running", err
	}
	if !errors.Is(err, kv.ErrLocked) {
		return 0, "", err
	}
	sock := filepath.Join(c.global.dataDir, adminSocketName)
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://ardx/backup", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("the store is in use and the running service's admin socket does not answer: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, "", fmt.Errorf("the running service refused the backup: %s: %s", resp.Status, b)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, "", fmt.Errorf("backup cut short: %w", err)
	}
	if want := resp.Trailer.Get(backupBytesTrailer); want != strconv.FormatInt(n, 10) {
		return n, "", fmt.Errorf("backup cut short: received %d bytes, the service wrote %q", n, want)
	}
	return n, "taken by the running service", nil
}

// startAdminSocket serves GET /backup on the data dir's admin socket. A data
// dir whose path is too long for a socket name only loses the hot backup.
func (c *cli) startAdminSocket(db *kv.DB, logger *slog.Logger) (*web.Server, error) {
	sock := filepath.Join(c.global.dataDir, adminSocketName)
	// A socket left by a process that died; the store's lock, which this
	// process holds, says no other ardx is serving this data dir.
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		logger.Warn("no admin socket: ardx backup works only while the service is stopped", "err", err)
		return nil, nil
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /backup", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Trailer", backupBytesTrailer)
		n, err := db.WriteBackup(w)
		if err != nil {
			logger.Error("backup failed", "err", err)
			return // no trailer: the client reports the copy as cut short
		}
		w.Header().Set(backupBytesTrailer, strconv.FormatInt(n, 10))
		logger.Info("backup taken", "bytes", n)
	})
	// A large store takes a while to stream; the socket is local.
	srv := &web.Server{Name: "admin", Listener: ln, Handler: mux, WriteTimeout: time.Hour}
	if err := srv.Open(); err != nil {
		return nil, err
	}
	return srv, nil
}

func (c *cli) restoreCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "restore BACKUP",
		Short: "Replace the data dir's ardx.db with a backup and rebuild the index (stop the service first)",
		Long: `Restore checks that BACKUP opens as an ardx store, keeps the data dir's current
ardx.db beside it as ardx.db.replaced-<time>, puts the backup in its place and
rebuilds the search index from it. The service must be stopped.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			logger, err := c.logger()
			if err != nil {
				return err
			}
			dir := c.global.dataDir
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			live := filepath.Join(dir, kv.FileName)
			if _, err := os.Stat(live); err == nil {
				db, err := kv.Open(dir, kv.Options{Timeout: 200 * time.Millisecond})
				if errors.Is(err, kv.ErrLocked) {
					return errors.New("a service is running on this data dir: stop it before restoring")
				}
				if err != nil {
					return err
				}
				db.Close()
			}
			// Stage the copy in the data dir (one file system, so the
			// rename is atomic) and prove it opens before it replaces
			// anything.
			stage, err := os.MkdirTemp(dir, ".restore-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(stage)
			if err := copyFile(args[0], filepath.Join(stage, kv.FileName)); err != nil {
				return err
			}
			db, err := kv.Open(stage, kv.Options{})
			if err != nil {
				return fmt.Errorf("%s is not an ardx store: %w", args[0], err)
			}
			entries, _ := db.CountEntries()
			if err := db.Close(); err != nil {
				return err
			}
			kept := ""
			if _, err := os.Stat(live); err == nil {
				kept = live + ".replaced-" + time.Now().UTC().Format("20060102T150405Z")
				if err := os.Rename(live, kept); err != nil {
					return err
				}
			}
			if err := os.Rename(filepath.Join(stage, kv.FileName), live); err != nil {
				return err
			}
			stores, err := c.openRegistryStores(cmd.Context(), logger, true)
			if err != nil {
				return fmt.Errorf("restored %s, but rebuilding the index failed (run ardx reindex): %w", live, err)
			}
			if err := stores.close(); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "restored %s from %s (%d entries, index rebuilt)\n", live, args[0], entries)
			if kept != "" {
				fmt.Fprintf(c.stdout, "the replaced store is kept as %s\n", kept)
			}
			return nil
		},
	}
}

// copyFile copies src to a new file dst and syncs it.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
