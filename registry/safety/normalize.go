package safety

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normText is the matching form of one field: NFKC, lower case, look-alikes
// mapped to Latin, invisible characters dropped and tag characters decoded.
// Each byte of text remembers the original byte span of the NFKC segment it
// came from, so a match on the normalised text maps back to the original.
type normText struct {
	text      string
	origStart []int // origStart[i]: original offset where the segment holding text[i] starts
	origEnd   []int // origEnd[i]: original offset where that segment ends
}

// normalize builds the matching form of s, which the caller has already
// capped. The work is linear in len(s).
func normalize(s string) normText {
	var (
		b     strings.Builder
		start = make([]int, 0, len(s))
		end   = make([]int, 0, len(s))
		it    norm.Iter
		buf   [utf8.UTFMax]byte
	)
	b.Grow(len(s))
	it.InitString(norm.NFKC, s)
	for !it.Done() {
		o0 := it.Pos()
		seg := it.Next()
		o1 := it.Pos()
		for len(seg) > 0 {
			r, size := utf8.DecodeRune(seg)
			seg = seg[size:]
			r, keep := matchRune(r)
			if !keep {
				continue
			}
			n := utf8.EncodeRune(buf[:], r)
			b.Write(buf[:n])
			for range n {
				start = append(start, o0)
				end = append(end, o1)
			}
		}
	}
	return normText{text: b.String(), origStart: start, origEnd: end}
}

// span maps a half-open byte span of the normalised text back to the
// original text.
func (n normText) span(s, e int) (int, int) {
	if s >= len(n.origStart) || e <= s {
		return 0, 0
	}
	return n.origStart[s], n.origEnd[e-1]
}

// matchRune returns the rune as the patterns should see it, or false when it
// should vanish from the matching text. Tag characters (U+E0020-U+E007E) are
// decoded rather than dropped so that an instruction hidden in them is still
// matched by the other rules.
func matchRune(r rune) (rune, bool) {
	switch {
	case r >= 0xE0020 && r <= 0xE007E:
		return unicode.ToLower(r - 0xE0000), true
	case isInvisible(r):
		return 0, false
	case r == 0x1B || r == 0x9B: // ESC and CSI: the sequence's printable tail stays
		return 0, false
	case r < 0x20 && r != '\n' && r != '\t' && r != '\r':
		return ' ', true
	}
	if l, ok := confusables[r]; ok {
		return l, true
	}
	return unicode.ToLower(r), true
}

// confusables maps Cyrillic and Greek letters that look like Latin ones (and
// survive NFKC) to the Latin letter, so "іgnоre" written with Cyrillic і and
// о still reads as "ignore". Text genuinely written in those scripts becomes
// Latin gibberish that no English pattern matches, so the mapping costs no
// false positives. Keys are lower case; upper-case forms are listed too
// because the lookup happens before lower-casing.
var confusables = map[rune]rune{
	'а': 'a', 'А': 'a', 'в': 'b', 'В': 'b', 'с': 'c', 'С': 'c', 'ԁ': 'd', 'е': 'e', 'Е': 'e',
	'һ': 'h', 'Н': 'h', 'і': 'i', 'І': 'i', 'ј': 'j', 'Ј': 'j', 'к': 'k', 'К': 'k', 'М': 'm',
	'о': 'o', 'О': 'o', 'р': 'p', 'Р': 'p', 'ԛ': 'q', 'ѕ': 's', 'Ѕ': 's', 'т': 't', 'Т': 't',
	'у': 'y', 'У': 'y', 'х': 'x', 'Х': 'x', 'ԝ': 'w', 'ɡ': 'g', 'ӏ': 'l',
	'α': 'a', 'Α': 'a', 'Β': 'b', 'ε': 'e', 'Ε': 'e', 'Η': 'h', 'ι': 'i', 'Ι': 'i', 'Κ': 'k',
	'Μ': 'm', 'Ν': 'n', 'ο': 'o', 'Ο': 'o', 'ρ': 'p', 'Ρ': 'p', 'Τ': 't', 'υ': 'u', 'Χ': 'x',
	'Υ': 'y', 'Ζ': 'z',
}

// isInvisible reports whether r renders as nothing in a typical client while
// still reaching the model: zero-width characters, bidi controls, word
// joiners and invisible operators, fillers, the BOM and the supplementary
// variation selectors (used to smuggle bytes). Tag characters are handled
// separately because they are decoded.
func isInvisible(r rune) bool {
	switch {
	case r >= 0x200B && r <= 0x200F, // zero-width space/non-joiner/joiner, LRM, RLM
		r >= 0x202A && r <= 0x202E, // bidi embeddings and overrides
		r >= 0x2060 && r <= 0x2064, // word joiner, invisible operators
		r >= 0x2066 && r <= 0x2069, // bidi isolates
		r == 0xFEFF,                // zero-width no-break space (BOM)
		r == 0x00AD,                // soft hyphen
		r == 0x061C,                // Arabic letter mark
		r == 0x180E,                // Mongolian vowel separator
		r == 0x115F || r == 0x1160 || r == 0x3164 || r == 0xFFA0, // Hangul fillers
		r >= 0xE0000 && r <= 0xE007F,                             // tag characters
		r >= 0xE0100 && r <= 0xE01EF:                             // variation selectors 17-256
		return true
	}
	return false
}

// Visible renders s for a human: every invisible character becomes
// <U+XXXX>, a run of Unicode tag characters becomes <tags "...">
// carrying the ASCII it hides, ESC becomes <ESC>, other control characters
// become <U+XXXX> and line breaks and tabs become single spaces, so an
// excerpt shows exactly what a model would read and a reader would not see.
func Visible(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, "<0x%02X>", s[i])
		case r >= 0xE0000 && r <= 0xE007F:
			j := i
			var hidden strings.Builder
			for j < len(s) {
				t, n := utf8.DecodeRuneInString(s[j:])
				if t < 0xE0000 || t > 0xE007F {
					break
				}
				if t >= 0xE0020 && t <= 0xE007E {
					hidden.WriteRune(t - 0xE0000)
				}
				j += n
			}
			fmt.Fprintf(&b, "<tags %q>", hidden.String())
			i = j
			continue
		case r == 0x1B:
			b.WriteString("<ESC>")
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case isInvisible(r), r < 0x20, r >= 0x7F && r < 0xA0:
			fmt.Fprintf(&b, "<U+%04X>", r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// capText cuts s to at most max bytes at a rune boundary.
func capText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// excerptContext is how many bytes of text either side of a match an
// excerpt shows; excerptMatchMax caps the match itself (a 10 KiB HTML
// comment is shown by its ends).
const (
	excerptContext  = 48
	excerptMatchMax = 240
)

// excerpt quotes s[start:end] with context, aligned to rune boundaries and
// rendered visible.
func excerpt(s string, start, end int) string {
	lo := max(0, start-excerptContext)
	for lo > 0 && !utf8.RuneStart(s[lo]) {
		lo--
	}
	hi := min(len(s), end+excerptContext)
	for hi < len(s) && !utf8.RuneStart(s[hi]) {
		hi++
	}
	match := s[start:end]
	if len(match) > excerptMatchMax {
		head := capText(match, excerptMatchMax/2)
		tail := match[len(match)-excerptMatchMax/2:]
		for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
			tail = tail[1:]
		}
		match = head + "…" + tail
	}
	var b strings.Builder
	if lo > 0 {
		b.WriteString("…")
	}
	b.WriteString(Visible(s[lo:start]))
	b.WriteString(Visible(match))
	b.WriteString(Visible(s[end:hi]))
	if hi < len(s) {
		b.WriteString("…")
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// sortFindings orders findings by their field's position among the tool's
// surfaces, then by offset, then by rule: deterministic output for golden
// files and for hashing a report.
func sortFindings(fs []Finding, fieldOrder map[string]int) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if fa, fb := fieldOrder[a.Field], fieldOrder[b.Field]; fa != fb {
			return fa < fb
		}
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		if a.End != b.End {
			return a.End < b.End
		}
		return a.Rule < b.Rule
	})
}
