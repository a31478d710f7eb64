package registry

// GET /feed/changes: the index's change feed (kv's changes bucket), paged by
// an opaque cursor, with the free tier's bounds.

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ardx-dev/ardx/kv"
	"github.com/ardx-dev/ardx/registry/access"
	"github.com/ardx-dev/ardx/web"
)

// The free tier of /feed/changes.
const (
	feedFreeWindow = 24 * time.Hour
	feedFreeItems  = 100
	// feedMonitoredItems is the page size a monitored domain's feed may ask.
	feedMonitoredItems = 1000
	// feedScanLimit bounds the events one filtered request reads, so a
	// rare filter cannot walk the whole log; the cursor then moves on past
	// what was read.
	feedScanLimit = 10000
)

// feedKinds are every kind the feed carries, documented in
// docs/decisions.md and the OpenAPI document.
var feedKinds = []string{
	kv.ChangeAdded, kv.ChangeChanged, kv.ChangeRemoved,
	ChangeToolChanged, ChangeEndpointDown, ChangeEndpointUp, ChangeToolsChanged,
	access.ChangeOwnerChanged,
}

// feedItem is one event of /feed/changes.
type feedItem struct {
	Cursor     string          `json:"cursor"` // resume after this item
	Time       time.Time       `json:"time"`
	Kind       string          `json:"kind"`
	Identifier string          `json:"identifier"`
	Publisher  string          `json:"publisher"`
	Source     string          `json:"source,omitempty"`
	Endpoint   string          `json:"endpoint,omitempty"`
	Detail     json.RawMessage `json:"detail,omitempty"`
}

// feedPage is the body of /feed/changes.
type feedPage struct {
	Items []feedItem `json:"items"`
	// NextCursor resumes after the last event read (also when filters
	// left it out); poll with it for what comes next.
	NextCursor string   `json:"nextCursor"`
	HasMore    bool     `json:"hasMore"`
	FreeTier   freeTier `json:"freeTier"`
}

type freeTier struct {
	Hours    int    `json:"hours"`
	MaxItems int    `json:"maxItems"`
	Note     string `json:"note"`
}

// cursorVersion prefixes the cursor bytes so its form can change later.
const cursorVersion = 1

func encodeCursor(seq uint64) string {
	var b [9]byte
	b[0] = cursorVersion
	binary.BigEndian.PutUint64(b[1:], seq)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func decodeCursor(s string) (uint64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 9 || b[0] != cursorVersion {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[1:]), true
}

// handleFeedChanges handles "GET /feed/changes?since&limit&publisher&kind".
func (s *Service) handleFeedChanges(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	var fe fieldErrors
	fe.onlyParams(q, "GET /feed/changes", "since", "limit", "publisher", "kind")
	one := func(name string) string {
		v := q[name]
		if len(v) > 1 {
			fe.add(name, "must be given once")
		}
		if len(v) == 0 {
			return ""
		}
		return strings.TrimSpace(v[0])
	}
	since, limitRaw, publisher, kind := one("since"), one("limit"), strings.ToLower(one("publisher")), one("kind")
	limit := feedFreeItems
	beyondFree := ""
	// A domain's live monitoring lifts the free tier for its feed.
	lifted := s.monitoringLifts(r, publisher)
	if limitRaw != "" {
		n, err := strconv.Atoi(limitRaw)
		switch {
		case err != nil || n < 1:
			fe.add("limit", "must be a positive integer")
		case lifted && n <= feedMonitoredItems:
			limit = n
		case n > feedFreeItems:
			beyondFree = "a page of more than " + strconv.Itoa(feedFreeItems) + " items"
		default:
			limit = n
		}
	}
	if kind != "" && !slices.Contains(feedKinds, kind) {
		fe.add("kind", "must be one of "+strings.Join(feedKinds, ", "))
	}
	if len(publisher) > 253 {
		fe.add("publisher", "must be a domain name of at most 253 characters")
	}
	now := s.cfg.Now().UTC()
	cutoff := now.Add(-feedFreeWindow)
	var after uint64
	byCursor := false
	switch {
	case since == "":
	case looksLikeTime(since):
		t, err := time.Parse(time.RFC3339, since)
		if err != nil {
			fe.add("since", "must be a cursor from a previous page or an RFC 3339 time")
			break
		}
		if t.Before(cutoff) {
			beyondFree = "changes from before " + cutoff.Format(time.RFC3339)
		}
		cutoff = t
	default:
		seq, ok := decodeCursor(since)
		if !ok {
			fe.add("since", "must be a cursor from a previous page or an RFC 3339 time")
		}
		after, byCursor = seq, true
	}
	if p := fe.problem(s.problems); p != nil {
		s.problems.Write(w, r, p)
		return
	}
	if lifted {
		beyondFree = ""
		if byCursor {
			cutoff = time.Time{} // no cursor is too old
		}
	}
	if beyondFree != "" {
		s.writeBeyondFree(w, r, beyondFree)
		return
	}
	if !byCursor {
		seq, err := s.db.ChangeSeqBefore(cutoff)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		after = seq
	}
	page := feedPage{Items: []feedItem{}, NextCursor: encodeCursor(after),
		FreeTier: freeTier{Hours: int(feedFreeWindow / time.Hour), MaxItems: feedFreeItems,
			Note: "further back or larger pages will need a key (not yet offered)"}}
	scanned := 0
	stale := false
	err := s.db.ScanChanges(after, func(c kv.Change) bool {
		if byCursor && scanned == 0 && c.Time.Before(cutoff) {
			stale = true // the caller would miss events older than the free tier
			return false
		}
		if len(page.Items) == limit || scanned == feedScanLimit {
			page.HasMore = true
			return false
		}
		scanned++
		page.NextCursor = encodeCursor(c.Seq)
		if kind != "" && c.Kind != kind || publisher != "" && c.Publisher != publisher {
			return true
		}
		page.Items = append(page.Items, feedItem{Cursor: encodeCursor(c.Seq), Time: c.Time, Kind: c.Kind,
			Identifier: c.ID, Publisher: c.Publisher, Source: c.Source, Endpoint: c.Endpoint, Detail: c.Detail})
		return true
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if stale {
		s.writeBeyondFree(w, r, "this cursor's next changes, which are older than "+cutoff.Format(time.RFC3339))
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	web.WriteJSON(w, http.StatusOK, page)
}

// looksLikeTime tells an RFC 3339 time from a cursor (cursors are
// base64url and never hold a colon).
func looksLikeTime(s string) bool { return strings.Contains(s, ":") }

// writeBeyondFree answers a request past the free tier. Keys are not
// offered yet, so no request gets further; the answer says so.
func (s *Service) writeBeyondFree(w http.ResponseWriter, r *http.Request, what string) {
	p := s.problems.New(web.SlugUnauthorized, "the free tier of /feed/changes is the last 24 hours and at most "+
		strconv.Itoa(feedFreeItems)+" items a page; "+what+" needs a key, and keys are not offered yet. Page with the cursor of your last page instead.")
	w.Header().Set("WWW-Authenticate", `Bearer realm="ardx"`)
	s.problems.Write(w, r, p)
}
