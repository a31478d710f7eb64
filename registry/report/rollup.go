package report

import (
	"bytes"
	"encoding/binary"
	"strings"
	"time"
	"unicode"

	"github.com/ardx-dev/ardx/kv"
)

// Rollups are kept at three granularities: a day, and aligned blocks of 8
// and 64 days (counted from the Unix epoch). A window of up to 365 days is
// read as at most about 33 blocks per entry instead of 365 days, which is
// what keeps /demand fast for a domain with 10,000 entries; a result costs
// one update per granularity.
var levels = [...]uint32{1, 8, 64}

// Key kinds, the first byte of every key of the reports bucket.
const (
	kindEntry  = 'e' // e domain 0 level block id     → entry stats
	kindQuery  = 'q' // q domain 0 level block text   → query stats
	kindDomain = 'd' // d domain 0 day                → domain day stats
	kindZero   = 'z' // z level block text            → zero-result query
	kindCount  = 'c' // c kind domain 0 level block   → distinct texts kept
)

// Bounds that keep the rollups' size proportional to days, not traffic.
const (
	// maxTextsPerDay bounds the distinct query texts kept per domain (and
	// zero-result texts overall) per day; a block of n days keeps up to n
	// times as many. Texts past the bound are counted together as "other
	// queries", so totals stay exact.
	maxTextsPerDay = 1000
	// maxTextLen bounds a kept query text (runes).
	maxTextLen = 200
	// maxAbove bounds the publishers kept as ranking above a domain for one
	// query text in one block; the rest count as others.
	maxAbove = 16
	// retentionDays is how long rollups are kept: the longest window any
	// report reads, and a margin.
	retentionDays = 400
)

// FirstPage is the last rank of a first page (the search default limit).
const FirstPage = 10

// rankBuckets are the upper bounds of the rank histogram's buckets; the
// last bucket holds every rank past the one before.
var rankBuckets = [...]int{1, 2, 3, 5, 10, 20, 50, 1 << 30}

// RankBucketLabels name the buckets of a rank histogram.
var RankBucketLabels = [...]string{"1", "2", "3", "4-5", "6-10", "11-20", "21-50", "51+"}

func rankBucket(rank int) int {
	for i, b := range rankBuckets {
		if rank <= b {
			return i
		}
	}
	return len(rankBuckets) - 1
}

// Day is a UTC day as days since the Unix epoch.
type Day uint32

// DayOf is t's UTC day.
func DayOf(t time.Time) Day { return Day(t.UTC().Unix() / 86400) }

// Time is the start of the day.
func (d Day) Time() time.Time { return time.Unix(int64(d)*86400, 0).UTC() }

// String is the day as YYYY-MM-DD.
func (d Day) String() string { return d.Time().Format("2006-01-02") }

// Stats count the appearances of an entry (or a domain's entries) in
// searches of one kind of traffic.
type Stats struct {
	Returned  int64                   // times returned
	FirstPage int64                   // times returned at rank <= FirstPage
	Best      int64                   // best rank, 0 when never returned
	Hist      [len(rankBuckets)]int64 // times returned per rank bucket
}

func (s *Stats) addRank(rank int) {
	s.Returned++
	if rank <= FirstPage {
		s.FirstPage++
	}
	if s.Best == 0 || int64(rank) < s.Best {
		s.Best = int64(rank)
	}
	s.Hist[rankBucket(rank)]++
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Returned += o.Returned
	s.FirstPage += o.FirstPage
	if o.Best != 0 && (s.Best == 0 || o.Best < s.Best) {
		s.Best = o.Best
	}
	for i := range s.Hist {
		s.Hist[i] += o.Hist[i]
	}
}

// entryVal is the value of an entry key: searches and probe traffic apart.
type entryVal struct{ Searches, Probe Stats }

func (v *entryVal) of(probe bool) *Stats {
	if probe {
		return &v.Probe
	}
	return &v.Searches
}

// QueryStats count the searches of one query text that returned a
// domain's entries.
type QueryStats struct {
	Searches int64 // searches of this text that returned an entry of the domain
	BestSum  int64 // sum over those searches of the domain's best rank
	Best     int64 // best rank seen
}

func (q *QueryStats) add(o QueryStats) {
	q.Searches += o.Searches
	q.BestSum += o.BestSum
	if o.Best != 0 && (q.Best == 0 || o.Best < q.Best) {
		q.Best = o.Best
	}
}

// queryVal is the value of a query key.
type queryVal struct {
	Shown            string // the text as first asked
	Searches, Probe  QueryStats
	Above, ProbeAbve map[string]int64 // publisher ranked above the domain's best → searches
	absent           bool             // not stored, and not kept by this batch: not written
}

// domainVal is the value of a domain day key: how many searches returned
// any of the domain's entries.
type domainVal struct{ Searches, Probe QueryStats }

// zeroVal is a zero-result query text of one block.
type zeroVal struct {
	Shown           string
	Searches, Probe int64
	Tags            []string // filter values (type, tags, capabilities) it asked
	absent          bool     // as queryVal's
}

// otherTexts is the key text under which texts past the bound on distinct
// texts are counted; a normalized text never holds a control character.
const otherTexts = "\x00"

// NormalizeQuery is the form query texts are counted under: lower case,
// spaces collapsed, control characters dropped, at most maxTextLen runes.
func NormalizeQuery(s string) string {
	var b strings.Builder
	n := 0
	space := false
	for _, r := range strings.TrimSpace(s) {
		if n == maxTextLen {
			break
		}
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if unicode.IsControl(r) {
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
			n++
		}
		space = false
		b.WriteRune(unicode.ToLower(r))
		n++
	}
	return b.String()
}

func truncRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// PublisherOf is the publisher segment of a urn:air: identifier, lower-cased.
func PublisherOf(id string) string {
	rest, ok := strings.CutPrefix(id, "urn:air:")
	if !ok {
		return ""
	}
	pub, _, _ := strings.Cut(rest, ":")
	return strings.ToLower(pub)
}

// Keys. A domain never holds a 0 byte (it is a DNS name), so it ends at
// the separator.

func blockPrefix(kind byte, domain string, level uint8, block uint32) []byte {
	return appendBlockPrefix(make([]byte, 0, len(domain)+8+64), kind, domain, level, block)
}

func appendBlockPrefix(k []byte, kind byte, domain string, level uint8, block uint32) []byte {
	k = append(k, kind)
	k = append(k, domain...)
	k = append(k, 0, level)
	return binary.BigEndian.AppendUint32(k, block)
}

func queryKey(domain string, level uint8, block uint32, text string) []byte {
	return append(blockPrefix(kindQuery, domain, level, block), text...)
}

func domainKey(domain string, day Day) []byte { return appendDomainKey(nil, domain, day) }

func appendDomainKey(k []byte, domain string, day Day) []byte {
	k = append(k, kindDomain)
	k = append(k, domain...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint32(k, uint32(day))
}

func zeroKey(level uint8, block uint32, text string) []byte {
	return appendZeroKey(nil, level, block, text)
}

func appendZeroKey(k []byte, level uint8, block uint32, text string) []byte {
	k = append(k, kindZero, level)
	k = binary.BigEndian.AppendUint32(k, block)
	return append(k, text...)
}

func countKey(kind byte, domain string, level uint8, block uint32) []byte {
	return appendCountKey(nil, kind, domain, level, block)
}

func appendCountKey(k []byte, kind byte, domain string, level uint8, block uint32) []byte {
	k = append(k, kindCount, kind)
	k = append(k, domain...)
	k = append(k, 0, level)
	return binary.BigEndian.AppendUint32(k, block)
}

// cover splits the days [from, to] into the fewest aligned blocks of the
// rollup levels that are built (m), calling fn with each block's level and
// number.
func cover(from, to Day, m marks, fn func(level uint8, block uint32) error) error {
	d := uint32(from)
	for d <= uint32(to) {
		li := len(levels) - 1
		for ; li > 0; li-- {
			s := levels[li]
			if d%s == 0 && d+s-1 <= uint32(to) && m.usable(li, d/s) {
				break
			}
		}
		if err := fn(uint8(li), d/levels[li]); err != nil {
			return err
		}
		d += levels[li]
	}
	return nil
}

// isOld reports whether the rollup key k of kind is past the cutoff day.
func isOld(kind byte, k []byte, old func(level uint8, block uint32) bool, cutoff uint32) bool {
	switch kind {
	case kindZero:
		return len(k) >= 6 && old(k[1], binary.BigEndian.Uint32(k[2:6]))
	case kindDomain:
		return len(k) >= 5 && binary.BigEndian.Uint32(k[len(k)-4:]) < cutoff
	case kindCount:
		return len(k) >= 7 && old(k[len(k)-5], binary.BigEndian.Uint32(k[len(k)-4:]))
	}
	i := bytes.IndexByte(k, 0)
	return i > 0 && len(k) >= i+6 && old(k[i+1], binary.BigEndian.Uint32(k[i+2:i+6]))
}

// Prune deletes rollups of blocks that ended more than retentionDays
// before now, at most limit keys, and reports how many it deleted.
func Prune(db *kv.DB, now time.Time, limit int) (int, error) {
	cutoff := uint32(DayOf(now)) - retentionDays
	old := func(level uint8, block uint32) bool {
		if int(level) >= len(levels) {
			return false
		}
		s := levels[level]
		return block*s+s-1 < cutoff
	}
	// Usually nothing is due: look in a read transaction first, so the
	// daily check does not hold the write lock while it reads every key.
	due := false
	if err := db.ViewReports(func(rb kv.Reports) error {
		for _, kind := range []byte{kindEntry, kindQuery, kindDomain, kindZero, kindCount} {
			if err := rb.Scan([]byte{kind}, nil, func(k, _ []byte) (bool, error) {
				due = isOld(kind, k, old, cutoff)
				return !due, nil
			}); err != nil || due {
				return err
			}
		}
		return nil
	}); err != nil || !due {
		return 0, err
	}
	n := 0
	err := db.UpdateReports(func(rb kv.Reports) error {
		for _, kind := range []byte{kindEntry, kindQuery, kindDomain, kindZero, kindCount} {
			if n >= limit {
				return nil
			}
			d, err := rb.DeleteRange([]byte{kind}, func(k []byte) bool { return isOld(kind, k, old, cutoff) }, limit-n)
			if err != nil {
				return err
			}
			n += d
		}
		return nil
	})
	return n, err
}
