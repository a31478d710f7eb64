// Package plan owns the deterministic decomposition of a task written in
// plain words into steps: sentences, then clauses at sequencing words
// ("then", "after that", "before", "after", "finally") and at conjunctions
// or commas that open a new verb; each step's verb and object; and the
// index's capabilities and tags that the step names. No language model is
// involved: the same task and vocabulary always give the same steps. The
// registry ranks each step's candidates with its own search.
package plan

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Capability is one capability of the index and its words (the identifier
// split: get_forecast is "get", "forecast").
type Capability struct {
	Name  string
	Words []string
}

// Vocabulary is what the decomposition knows of the index.
type Vocabulary struct {
	verbs map[string]bool
	tags  map[string]bool
	caps  []Capability
}

// commonVerbs are actions tasks are written with; the index adds the words
// its capabilities open with.
var commonVerbs = words(`add analyse analyze annotate approve archive ask assign audit authenticate back
book buy calculate call cancel charge check classify clean collect compare compile compress compute
configure convert copy count create crawl debug decode decrypt delete deploy design detect diagnose
download draft edit email encode encrypt enrich estimate evaluate export extract fetch file fill filter
find fix forecast format generate geocode get import index inspect install invoice list load locate log
look make manage map match measure merge migrate monitor move notify open optimise optimize order
parse pay plan post predict prepare print process publish query rank read reconcile record refund
remind remove render rename reply report request reserve resize retrieve review rewrite route run
save scan schedule score scrape search send set share sign sort split start stop store submit
summarise summarize sync tag test track train transcribe transform translate update upload validate
verify visualise visualize watch write`)

// fillers open a clause without saying what to do.
var fillers = words(`i we you please want wants need needs to also then first would like can could should
let lets let's me us my our just kindly help and so`)

// stopwords carry no object.
var stopwords = words(`a an the it them its their this that these those of for to in on at with from by into
as some any me us my our your all each every and or is are be via using about over per`)

func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// NewVocabulary builds a vocabulary from the index's capabilities (with
// their words) and tags. A word that opens at least two capabilities counts
// as a verb (get, list, send...) unless it is also a tag: once is as likely
// a noun (forecast_daily).
func NewVocabulary(caps []Capability, tags []string) *Vocabulary {
	v := &Vocabulary{verbs: map[string]bool{}, tags: map[string]bool{}}
	for w := range commonVerbs {
		v.verbs[w] = true
	}
	opens := map[string]int{}
	for _, c := range caps {
		ws := make([]string, 0, len(c.Words))
		for _, w := range c.Words {
			if w = strings.ToLower(w); w != "" {
				ws = append(ws, w)
			}
		}
		if len(ws) == 0 {
			continue
		}
		v.caps = append(v.caps, Capability{Name: c.Name, Words: ws})
		opens[ws[0]]++
	}
	slices.SortFunc(v.caps, func(a, b Capability) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range tags {
		if t = strings.ToLower(strings.TrimSpace(t)); t != "" {
			v.tags[t] = true
		}
	}
	// A tag is a topic, a noun (weather_forecast, weather_alerts): it
	// does not become a verb however many capabilities it opens.
	for w, n := range opens {
		if n >= 2 && len(w) >= 3 && !stopwords[w] && !v.tags[w] && !unicode.IsDigit(rune(w[0])) {
			v.verbs[w] = true
		}
	}
	return v
}

// Step is one step of a plan.
type Step struct {
	Step   int    `json:"step"`   // 1-based, in the order to do them
	Text   string `json:"text"`   // the clause as written
	Verb   string `json:"verb"`   // "" when the clause does not open with a known action
	Object string `json:"object"` // what the verb acts on
	Query  string `json:"query"`  // what is searched for the step
	// After lists the steps that must be done first: the previous step
	// after a sequencing word, none for steps joined by "and" or a comma.
	After        []int    `json:"after"`
	Capabilities []string `json:"capabilities"` // index capabilities all of whose words the step says
	Tags         []string `json:"tags"`         // index tags the step says
}

// MaxSteps bounds a plan; clauses beyond it are folded into the last step.
const MaxSteps = 10

// maxStepCapabilities bounds the capabilities listed per step.
const maxStepCapabilities = 8

// link says how a clause follows the one before it.
type link int

const (
	linkFirst link = iota // the first clause of the task
	linkSeq               // after the previous clause
	linkPar               // beside the previous clause (same prerequisites)
)

type clause struct {
	toks []token
	link link
}

type token struct {
	text  string // as written
	lower string
	comma bool
}

var tokenRE = regexp.MustCompile(`[\p{L}\p{N}][\p{L}\p{N}'’_\-./]*|,`)
var sentenceRE = regexp.MustCompile(`[.!?;:](\s+|$)|\n+`)

// seqMarkers are the sequencing words and phrases, longest first.
var seqMarkers = [][]string{
	{"and", "after", "that"}, {"and", "then"}, {"and", "finally"}, {"after", "that"}, {"followed", "by"},
	{"afterwards"}, {"afterward"}, {"then"}, {"next"}, {"finally"}, {"subsequently"}, {"lastly"},
}

// Decompose splits task into steps. A task that is one action is one step.
func Decompose(task string, v *Vocabulary) []Step {
	var all []clause
	for _, sentence := range sentenceRE.Split(task, -1) {
		cs := splitSentence(tokenize(sentence), v)
		if len(cs) > 0 && len(all) > 0 {
			cs[0].link = linkSeq // sentences follow one another
		}
		all = append(all, cs...)
	}
	var steps []Step
	var prereq []int // prerequisites of the previous step
	for _, c := range all {
		st, ok := v.step(c.toks)
		if !ok {
			continue
		}
		if len(steps) == MaxSteps {
			last := &steps[len(steps)-1]
			last.Text += " " + st.Text
			last.Query = strings.TrimSpace(last.Query + " " + st.Query)
			continue
		}
		st.Step = len(steps) + 1
		switch {
		case len(steps) == 0:
			st.After = []int{}
		case c.link == linkPar:
			st.After = slices.Clone(prereq)
		default:
			st.After = []int{len(steps)}
		}
		prereq = st.After
		steps = append(steps, st)
	}
	if len(steps) == 0 {
		// Nothing but fillers: the task as written is the one step.
		st, _ := v.stepOf(tokenize(task), true)
		st.Step, st.After = 1, []int{}
		steps = append(steps, st)
	}
	return steps
}

func tokenize(s string) []token {
	var out []token
	for _, t := range tokenRE.FindAllString(s, -1) {
		t = strings.TrimRight(t, "-./")
		if t == "" {
			continue
		}
		out = append(out, token{text: t, lower: strings.ToLower(t), comma: t == ","})
	}
	return out
}

// splitSentence cuts one sentence into clauses.
func splitSentence(toks []token, v *Vocabulary) []clause {
	var out []clause
	cur := clause{link: linkFirst}
	// reversed holds a clause that "after" said comes second: "A after B"
	// is B, then A.
	var reversed *clause
	leadingOrder := link(-1) // set by a leading "after"/"before": how the comma joins
	flush := func(next link) {
		if len(cur.toks) > 0 {
			out = append(out, cur)
		}
		cur = clause{link: next}
	}
	emitReversed := func() {
		if reversed != nil {
			flush(linkSeq)
			r := *reversed
			r.link = linkSeq
			out = append(out, r)
			reversed = nil
		}
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if n := matchSeq(toks[i:]); n > 0 {
			flush(linkSeq)
			i += n - 1
			continue
		}
		switch {
		case t.lower == "after" || t.lower == "before" || t.lower == "once" || t.lower == "when":
			if len(cur.toks) == 0 {
				// "After B, A" / "Once B, A": B first, the comma opens A.
				// "Before B, A": A first; kept in the written order with
				// B after A, the cheaper reading to get right.
				leadingOrder = linkSeq
				continue
			}
			if t.lower == "after" {
				c := cur
				reversed = &c
				cur = clause{link: c.link}
				continue
			}
			if t.lower == "before" {
				flush(linkSeq)
				continue
			}
		case t.comma:
			if leadingOrder >= 0 {
				flush(leadingOrder)
				leadingOrder = -1
				continue
			}
			if next := nextWord(toks, i+1); next != "" && (v.isVerb(next) || next == "and" && v.isVerb(nextWord(toks, i+2))) {
				if reversed != nil {
					emitReversed()
				}
				flush(linkPar)
				if next == "and" {
					i++
				}
				continue
			}
			continue // a comma inside a clause says nothing
		case t.lower == "and" || t.lower == "also" && len(cur.toks) > 0:
			if next := nextWord(toks, i+1); v.isVerb(next) || next == "also" && v.isVerb(nextWord(toks, i+2)) {
				if reversed != nil {
					emitReversed()
				}
				flush(linkPar)
				continue
			}
		}
		cur.toks = append(cur.toks, t)
	}
	if reversed != nil {
		emitReversed()
		// emitReversed flushed cur (B) and appended A after it.
		return out
	}
	flush(linkSeq)
	return out
}

func matchSeq(toks []token) int {
	for _, m := range seqMarkers {
		if len(toks) < len(m) {
			continue
		}
		ok := true
		for j, w := range m {
			if toks[j].lower != w {
				ok = false
				break
			}
		}
		if ok {
			return len(m)
		}
	}
	return 0
}

func nextWord(toks []token, i int) string {
	if i < len(toks) && !toks[i].comma {
		return toks[i].lower
	}
	return ""
}

// step builds the step of a clause; ok is false for a clause of fillers
// and stopwords only.
func (v *Vocabulary) step(toks []token) (Step, bool) { return v.stepOf(toks, false) }

func (v *Vocabulary) stepOf(toks []token, always bool) (Step, bool) {
	var text []string
	for _, t := range toks {
		if !t.comma {
			text = append(text, t.text)
		}
	}
	st := Step{Text: strings.Join(text, " "), Capabilities: []string{}, Tags: []string{}}
	// Leading fillers: "I want to", "please", "also".
	i := 0
	for i < len(toks) && (toks[i].comma || fillers[toks[i].lower]) {
		i++
	}
	rest := toks[i:]
	if len(rest) > 0 {
		if verb, ok := v.verb(rest[0].lower); ok {
			st.Verb = verb
			rest = rest[1:]
		}
	}
	var object, query []string
	if st.Verb != "" {
		query = append(query, st.Verb)
	}
	for _, t := range rest {
		if t.comma || stopwords[t.lower] {
			continue
		}
		object = append(object, t.lower)
		query = append(query, t.lower)
	}
	if len(query) == 0 && !always {
		return st, false
	}
	if len(query) == 0 {
		for _, t := range toks {
			if !t.comma {
				query = append(query, t.lower)
			}
		}
	}
	st.Object = strings.Join(object, " ")
	st.Query = strings.Join(query, " ")
	said := map[string]bool{}
	for _, w := range query {
		said[stem(w)] = true
	}
	for _, c := range v.caps {
		all := true
		for _, w := range c.Words {
			if !said[stem(w)] {
				all = false
				break
			}
		}
		if all && len(st.Capabilities) < maxStepCapabilities {
			st.Capabilities = append(st.Capabilities, c.Name)
		}
	}
	seen := map[string]bool{}
	for _, w := range query {
		for _, form := range []string{w, stem(w), stem(w) + "s"} {
			if v.tags[form] && !seen[form] {
				seen[form] = true
				st.Tags = append(st.Tags, form)
				break
			}
		}
	}
	slices.Sort(st.Tags)
	return st, true
}

// verb returns the base form of w when it is an action word, written
// plain ("translate") or as a gerund ("translating", "sending").
func (v *Vocabulary) verb(w string) (string, bool) {
	if v.verbs[w] {
		return w, true
	}
	if base, ok := strings.CutSuffix(w, "ing"); ok && len(base) >= 2 {
		for _, b := range []string{base, base + "e", base[:len(base)-1]} {
			if v.verbs[b] {
				return b, true
			}
		}
	}
	return "", false
}

func (v *Vocabulary) isVerb(w string) bool { _, ok := v.verb(w); return ok }

// stem folds a plural: the cheapest stemming that makes "invoices" say
// "invoice" and "alerts" say "alert".
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		return w[:len(w)-1]
	}
	return w
}
