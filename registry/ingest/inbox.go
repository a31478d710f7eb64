package ingest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The inbox is how a running server ingests: only one process may hold
// the data dir, so `ardx ingest` cannot write to it while `ardx serve`
// runs. Files dropped into <data>/inbox are ingested by the server, each
// *.json file as one source keyed by its inbox path (dropping a file of the
// same name again replaces what it held), then moved to inbox/done or, if
// the source failed or had rejected entries, inbox/failed, with the report
// beside it as <name>.report.txt. Write a file elsewhere and rename it into
// the inbox, so the server never reads half of it; names starting with a
// dot are left alone.

// InboxDir is the inbox folder under a data dir.
func InboxDir(dataDir string) string { return filepath.Join(dataDir, "inbox") }

// WatchInbox ingests the inbox under dir every interval until ctx ends or
// stop is called; stop waits for a pass under way.
func (in *Ingester) WatchInbox(ctx context.Context, dir string, interval time.Duration) (stop func(), err error) {
	for _, d := range []string{dir, filepath.Join(dir, "done"), filepath.Join(dir, "failed")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			in.ingestInbox(ctx, dir)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }, nil
}

// ingestInbox ingests every manifest now in dir, one source at a time.
func (in *Ingester) ingestInbox(ctx context.Context, dir string) {
	log := in.logger().With("job", "inbox")
	ents, err := os.ReadDir(dir)
	if err != nil {
		log.Error("inbox: read", "dir", dir, "err", err)
		return
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if n := e.Name(); e.Type().IsRegular() && !strings.HasPrefix(n, ".") && strings.EqualFold(filepath.Ext(n), ".json") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if ctx.Err() != nil {
			return
		}
		p := filepath.Join(dir, name)
		rep, err := in.Ingest(ctx, p)
		if ctx.Err() != nil {
			return // shutting down: the file stays for the next start
		}
		var out bytes.Buffer
		failed := err != nil || rep == nil || len(rep.Errors()) > 0 || rep.Rejected() > 0
		if rep != nil {
			rep.Print(&out)
		}
		if err != nil {
			out.WriteString("error: " + err.Error() + "\n")
		}
		to := filepath.Join(dir, "done")
		if failed {
			to = filepath.Join(dir, "failed")
		}
		if err := os.Rename(p, filepath.Join(to, name)); err != nil {
			log.Error("inbox: move", "file", name, "err", err)
			return // never ingest the same file in a loop
		}
		_ = os.WriteFile(filepath.Join(to, name+".report.txt"), out.Bytes(), 0o600)
		log.Info("inbox: ingested", "file", name, "failed", failed, "stored", storedOf(rep))
	}
}

func storedOf(rep *Report) int {
	if rep == nil {
		return 0
	}
	return rep.Stored()
}
