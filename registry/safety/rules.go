package safety

import (
	"regexp"
	"regexp/syntax"
	"strings"
)

// Stable rule identifiers. They appear in API responses and stored reports,
// so they never change meaning; a new kind of finding gets a new id.
const (
	RuleInstructionToModel   = "instruction-to-model"
	RuleCredentialReference  = "credential-reference"
	RuleExfiltrationSink     = "exfiltration-sink"
	RuleCrossToolReference   = "cross-tool-reference"
	RuleHiddenText           = "hidden-text"
	RuleOversizedDescription = "oversized-description"
)

// Length thresholds for RuleOversizedDescription, in characters (runes) of
// the original text. A description this long costs context on every request
// and leaves room to bury instructions a reviewer will not read. In 8,010
// public tool descriptions (toolsdk registry) the 99th percentile is about
// 1,350 characters and only 0.1% exceed 4,000, so the thresholds flag the
// outliers, not long-but-ordinary documentation.
const (
	MaxDescriptionRunes         = 4096  // a tool's description
	MaxPropertyDescriptionRunes = 1024  // any description inside the input schema
	MaxInstructionsRunes        = 16384 // the server's instructions, shared by all its tools
)

// Input bounds: text beyond these is not matched (oversized-description
// still reports the full length), so a hostile tool list costs bounded CPU.
const (
	MaxFieldBytes     = 64 << 10  // matched prefix of any one text field
	MaxSchemaBytes    = 512 << 10 // an input schema larger than this is not parsed
	maxSchemaDepth    = 32        // nesting depth walked inside the input schema
	maxSurfaces       = 4096      // text surfaces taken from one tool
	maxFindingsPerKey = 16        // findings kept per (field, rule)
)

// RuleInfo describes one rule for API consumers: its stable id and why it
// exists.
type RuleInfo struct {
	ID  string `json:"id"`
	Why string `json:"why"`
}

// Rules returns every rule in a fixed order, with the reason each exists.
func Rules() []RuleInfo {
	return []RuleInfo{
		{RuleInstructionToModel, "Text addressed to the model rather than describing the tool (\"ignore previous instructions\", <IMPORTANT> tags, \"do not tell the user\", mandatory preconditions, role overrides): the core of published tool-poisoning attacks, which hide orders to the model inside a description the user never reads."},
		{RuleCredentialReference, "References to secrets and the files that hold them (~/.ssh, id_rsa, .env, cloud credentials, /etc/passwd, browser cookies, MCP client configs) or requests to read or pass keys, tokens, passwords and seed phrases: poisoned tools ask the model to fetch these and hand them over as an argument."},
		{RuleExfiltrationSink, "Places data could be sent: capture and tunnel hosts, raw-IP URLs, a literal URL or e-mail address as the target of a send, base64-encode-then-send, and orders to send the conversation or secrets somewhere: the second half of an exfiltration."},
		{RuleCrossToolReference, "Text that changes how other tools behave (\"when the user calls send_email, also ...\", \"instead of using X\", never use other tools): tool shadowing, where one server's description hijacks another server's trusted tool."},
		{RuleHiddenText, "Characters a person does not see but a model reads: zero-width and bidi controls, Unicode tag characters (decoded in the excerpt), ANSI escape sequences and HTML comments; there is no honest reason to hide text from the reviewer."},
		{RuleOversizedDescription, "Descriptions far longer than ordinary documentation (thresholds MaxDescriptionRunes, MaxPropertyDescriptionRunes, MaxInstructionsRunes): they cost context on every request and are where instructions get buried."},
	}
}

// pattern is one regular expression of a rule. Patterns run on normalised,
// lower-case text. A subexpression named "hit", when present, is the span
// reported (the rest is context the match needs). reject, when set, vetoes a
// match its submatches show to be benign (RE2 has no look-around, so
// exceptions are checked in Go).
type pattern struct {
	re     *regexp.Regexp
	reject func(text string, m []int) bool
}

// textRule is a rule implemented by patterns over normalised text.
type textRule struct {
	id       string
	patterns []pattern
}

// ruleMatcher is a textRule ready for scanning, with a literal prefilter
// per pattern: almost no field matches anything, and a substring search for
// the literals a pattern cannot match without is far cheaper than running
// the regular expression.
type ruleMatcher struct {
	id       string
	patterns []pattern
	needles  [][]string // needles[i]: one of these occurs in every match of patterns[i]; nil: no prefilter
}

var matchers = compileMatchers(textRules)

func compileMatchers(rules []textRule) []ruleMatcher {
	out := make([]ruleMatcher, 0, len(rules))
	for _, r := range rules {
		m := ruleMatcher{id: r.id, patterns: r.patterns}
		for _, p := range r.patterns {
			m.needles = append(m.needles, requiredLiterals(p.re.String()))
		}
		out = append(out, m)
	}
	return out
}

// mayMatch reports whether pattern i can match text.
func (m *ruleMatcher) mayMatch(i int, text string) bool {
	if m.needles[i] == nil {
		return true
	}
	for _, n := range m.needles[i] {
		if strings.Contains(text, n) {
			return true
		}
	}
	return false
}

// requiredLiterals returns a set of literals one of which every match of
// expr contains, or nil when it cannot tell. It is conservative: a nil or
// wrong-but-larger set only costs speed, never a missed match.
func requiredLiterals(expr string) []string {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	set, ok := required(re.Simplify())
	if !ok {
		return nil
	}
	return set
}

func shortest(set []string) int {
	n := len(set[0])
	for _, s := range set[1:] {
		n = min(n, len(s))
	}
	return n
}

func required(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil, false
		}
		return []string{string(re.Rune)}, true
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min < 1 {
			return nil, false
		}
		return required(re.Sub[0])
	case syntax.OpConcat:
		// Any element that must match gives a valid set; take the one whose
		// shortest literal is longest (the most selective).
		var best []string
		for _, sub := range re.Sub {
			set, ok := required(sub)
			if ok && (best == nil || shortest(set) > shortest(best)) {
				best = set
			}
		}
		return best, best != nil
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			set, ok := required(sub)
			if !ok {
				return nil, false
			}
			all = append(all, set...)
		}
		return all, true
	}
	return nil, false
}

func p(expr string) pattern { return pattern{re: regexp.MustCompile(expr)} }

func pr(expr string, reject func(string, []int) bool) pattern {
	return pattern{re: regexp.MustCompile(expr), reject: reject}
}

// group1In rejects a match whose first submatch (trimmed of quotes) is one
// of words: "when you call this tool" names the tool itself, not another.
func group1In(words ...string) func(string, []int) bool {
	set := make(map[string]bool, len(words))
	for _, w := range words {
		set[w] = true
	}
	return func(text string, m []int) bool {
		if len(m) < 4 || m[2] < 0 {
			return false
		}
		return set[strings.Trim(text[m[2]:m[3]], "`'\"")]
	}
}

// Shared fragments. w is one word with the punctuation tool names use.
const (
	user     = `(?:the\s+|your\s+|an?\s+)?(?:user|human|operator|end[\s-]user|person)s?\b`
	determin = `(?:(?:all|any|every|the|their|your|users?'?s?|his|her|its|this|these|of|saved|stored|existing|local|available|full|complete|entire|whole|contents?|previous|prior|past|current|relevant)\s+)*`
	secretNP = `(?:api[\s_-]?keys?|access[\s_-]?tokens?|auth(?:entication)?[\s_-]?tokens?|bearer[\s_-]?tokens?|session[\s_-]?(?:tokens?|cookies?)|secret[\s_-]?keys?|private[\s_-]?keys?|passwords?|passphrases?|seed[\s_-]?phrases?|mnemonics?(?:\s+phrases?)?|recovery[\s_-]?phrases?|credentials?|secrets|ssh[\s_-]?keys?|cookies|environment\s+variables|env\s+vars?)\b`
	chatNP   = `(?:(?:conversation|chat|message|dialog(?:ue)?)\s+(?:history|log|logs|transcript|context)|conversation\b|system\s+prompt|context\s+window|(?:previous|prior|earlier)\s+messages|tool\s+results)`
	toolName = "[\\w.:/`'\"-]+"
	// identLike is a word spelled like a tool identifier (snake_case,
	// dotted, kebab-case) or quoted in backticks: "calls send_email", not
	// "uses filters".
	identLike = "(?:[\\w-]*[_.][\\w.-]*\\w|[a-z0-9]+-[\\w-]*\\w|`[^`\\n]{1,64}`)"
	emailAddr = `[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}`
	sendVerb  = `(?:send|post|upload|append|attach|include|embed|pass|forward|transmit|add)(?:s|ed|ing)?\b`
	// strongMove takes any secret; weakMove only one marked as someone's
	// or all of them ("send your API key", "read all tokens"), so a
	// description of a protocol ("each call sends apiKey") does not fire.
	strongMove = `(?:exfiltrat(?:e|es|ing)|steal(?:s|ing)?|harvest(?:s|ing)?|leak(?:s|ing)?|dump(?:s|ing)?|grab(?:s|bing)?)`
	weakMove   = `(?:read|reads|reading|include|includes|including|collect|collects|extract|extracts|gather|gathers|reveal|reveals|copy|copies|send|sends|sending|upload|uploads|forward|forwards|attach|attaches|append|appends|paste|pastes)`
	ownerDet   = `(?:(?:the\s+|all\s+(?:of\s+)?(?:the\s+)?|any\s+|every\s+|each\s+)?(?:your|their|users?[’']?s?|the\s+user[’']?s|his|her|all|any|every|saved|stored|local|existing|entire)\s+)+`
)

// textRules are the pattern rules. hidden-text and oversized-description are
// structural and live in hidden.go and scan.go.
var textRules = []textRule{
	{RuleInstructionToModel, []pattern{
		// Override of what came before.
		p(`\b(?:ignore|disregard|forget|override|bypass)\s+(?:(?:all|any|the|your|of|every|these|those)\s+)*(?:previous|prior|above|earlier|preceding|former|original|other|system|safety|security|existing|initial)\s+(?:[\w-]+\s+)?(?:instructions?|prompts?|rules|directions?|guidelines|guidance|messages|context|constraints|policies|restrictions)\b`),
		p(`\b(?:ignore|disregard|forget)\s+(?:all|any|every)\s+(?:of\s+)?(?:the\s+|your\s+)?(?:instructions?|prompts?|rules|guidelines)\s+(?:above|before|given|you\s+(?:were|have\s+been)\s+given)\b`),
		// Tags that pose as a higher-priority channel.
		p(`<\s*/?\s*(?:important|system|system[_ -]?prompt|instructions?|admin|critical|secret|hidden|override|assistant|sys|im_start|im_end|inst|priority|mandatory|note[_ -]?to[_ -]?(?:ai|assistant|model)|ai[_ -]?instructions?)\s*>|\[/?(?:inst|system|important|sys)\]|<<\s*/?sys\s*>>|<\|(?:im_start|im_end|system|endoftext)\|>`),
		// Concealment from the user.
		p(`\b(?:do\s+not|don[’']?t|never|without)\s+(?:ever\s+)?(?:tell|telling|mention|mentioning|inform|informing|notify|notifying|alert|alerting|reveal|revealing|disclose|disclosing|show|showing|let|letting)\s+(?:this\s+|it\s+|that\s+|anything\s+|any\s+of\s+this\s+)?(?:to\s+)?` + user),
		p(`\b(?:hide|conceal|keep)\s+(?:this|it|that|these\s+\w+|the\s+\w+)\s+(?:hidden\s+|secret\s+)?from\s+` + user),
		p(`\b(?:the\s+)?(?:user|human)\s+(?:must|should|shall|will|need)\s+(?:not|never)\s+(?:know|see|notice|learn|be\s+(?:told|informed|aware|notified))\b`),
		p(`\byou\s+(?:must|should|shall|will|may)\s+(?:not|never)\s+(?:reveal|disclose|mention|tell|share|expose|explain|discuss)\b`),
		p(`\bwithout\s+(?:the\s+)?(?:user|human)(?:'s)?\s+(?:knowledge|knowing|awareness|noticing)\b`),
		// Mandatory preconditions addressed to the model.
		p(`\bbefore\s+(?:using|calling|invoking|running|executing|you\s+use|you\s+call)\s+(?:this|the|any|any\s+other)\s+(?:tool|function|server)s?\b,?\s*(?:you\s+)?(?:must|should|need\s+to|have\s+to|are\s+required\s+to|always|first|make\s+sure)\b`),
		p(`\balways\s+(?:call|use|invoke|run|execute)\s+(?:the\s+)?` + toolName + `(?:\s+(?:tool|function))?\s+(?:first|before)\b`),
		// Role play and overrides of the model's identity.
		p(`\b(?:you\s+are\s+now|from\s+now\s+on,?\s+(?:you|the\s+assistant)|pretend\s+(?:to\s+be|you\s+are|that\s+you)|role[\s-]?play\s+as|new\s+system\s+prompt|system\s+override|developer\s+mode|jailbreak|dan\s+mode|your\s+(?:new\s+)?(?:instructions|task|role|purpose)\s+(?:is|are)\s+now|act\s+as\s+(?:if\s+you\s+(?:are|were)|an?\s+unrestricted))\b`),
		// Covert intent.
		p(`\b(?:secretly|covertly|surreptitiously|stealthily)\b`),
		p(`\bsilently\s+(?:send|upload|forward|copy|read|include|collect|append|attach|call|run|execute|exfiltrat\w*|add)\b`),
	}},
	{RuleCredentialReference, []pattern{
		// Files that hold secrets.
		p(`(?:~|\$home|%userprofile%)?/?\.ssh(?:/[\w.-]+)?\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\bauthorized_keys\b|\.aws/(?:credentials|config)\b|~/\.aws(?:/[\w.-]+)?\b|/etc/(?:passwd|shadow|sudoers|master\.passwd)\b|(?:^|[^\w.])\.(?:npmrc|pypirc|netrc|pgpass|git-credentials)\b|\.docker/config\.json\b|\.kube/config\b|\.gnupg\b|\bwallet\.dat\b`),
		p(`(?:^|[\s"'\x60(/~])(?P<hit>\.env(?:\.[a-z]+)?)\b`),
		// MCP client configurations (they hold other servers' keys).
		p(`\bmcp\.json\b|\bclaude_desktop_config\.json\b|\bcline_mcp_settings\.json\b|\bmcp_config\.json\b|\.cursor/mcp\b|\.codeium/windsurf\b`),
		// Browser secrets.
		p(`\b(?:browser|chrome|chromium|firefox|safari|edge|brave)(?:'s)?\s+(?:saved\s+)?(?:cookies|passwords|login\s+data|credentials)\b|\bcookies\.sqlite\b|\blogin\s+data\s+(?:file|database|sqlite)\b`),
		// Moving a secret: read or hand over, not merely "requires an API key".
		p(`\b` + strongMove + `\s+` + determin + secretNP),
		p(`\b` + weakMove + `\s+` + ownerDet + `(?:[\w-]+\s+)?` + secretNP),
		p(`\b(?:contents?|content)\s+of\s+(?:the\s+|your\s+|their\s+)?` + secretNP),
	}},
	{RuleExfiltrationSink, []pattern{
		// Capture, tunnel and paste hosts: there is no reason to name them in a description except as a sink.
		p(`\b(?:webhook\.site|requestbin\.[a-z]+|[\w-]+\.pipedream\.net|[\w-]+\.ngrok(?:-free)?\.(?:io|app|dev)|ngrok\.io|burpcollaborator\.net|oastify\.com|interact\.sh|[\w-]+\.oast\.(?:fun|me|pro|live|site|online)|hookbin\.com|beeceptor\.com|requestcatcher\.com|postb\.in|ptsv[23]\.com|canarytokens\.[a-z]+|discord(?:app)?\.com/api/webhooks|transfer\.sh|0x0\.st)\S*`),
		// URLs on a public raw IP address.
		pr(`\bhttps?://(\d{1,3}(?:\.\d{1,3}){3})(?::\d+)?\S*`, func(text string, m []int) bool {
			return isLocalIP(text[m[2]:m[3]])
		}),
		// A send whose target is a literal URL or e-mail address.
		p(`\b(?:send|sends|sending|post|posts|posting|upload|uploads|uploading|forward|forwards|forwarding|transmit|transmits|exfiltrate|exfiltrates|leak|leaks|relay|relays|pipe|beacon|copy|copies|mirror|mirrors|report|reports)\b\s+(?:[\w'’.,-]+\s+){0,8}?(?:to|at|into)\s+(?:(?:the\s+)?(?:url|address|endpoint|server|webhook|email)\s+)?(?:https?://\S+|` + emailAddr + `)`),
		p(`\b(?:bcc|cc|blind\s+copy|carbon\s+copy)\b[^.\n]{0,40}?` + emailAddr),
		// A send of the conversation or of secrets.
		p(`\b(?:send|sends|post|posts|upload|uploads|forward|forwards|transmit|transmits|relay|relays)\s+` + determin + chatNP),
		p(`\b(?:send|sends|post|posts|upload|uploads|forward|forwards|transmit|transmits|relay|relays)\s+` + ownerDet + `(?:[\w-]+\s+)?` + secretNP),
		p(`\b(?:exfiltrat\w*|leak|leaks)\s+` + determin + `(?:` + chatNP + `|` + secretNP + `)`),
		p(`\b(?:include|append|attach|embed|put|pass|add)\s+` + determin + chatNP + `\s+(?:in|into|as|to)\s+(?:the\s+)?(?:\w+\s+){0,2}(?:parameter|argument|field|param|request|url|query)\b`),
		// Encode, then send: the shape of smuggling data out through an argument or URL.
		p(`\b(?:base64|b64)[\s-]*encod\w*\s+[^.\n]{0,80}?\b(?:and|then)\s+(?:\w+\s+){0,2}` + sendVerb),
		p(`\bencod\w*\s+[^.\n]{0,60}?\b(?:in|as|with|to|into)\s+base64\s*,?\s+(?:and|then)\s+(?:\w+\s+){0,2}` + sendVerb),
	}},
	{RuleCrossToolReference, []pattern{
		pr(`\bwhen(?:ever)?\s+(?:the\s+)?(?:user|you|assistant|agent|model|llm|ai|claude)?\s*(?:calls?|uses?|invokes?|runs?|executes?|triggers?)\s+(?:the\s+|any\s+|a\s+)?(?:(`+toolName+`)\s+(?:tool|function|command)s?\b|`+identLike+`)\s*,?\s*(?:also|first|always|instead|make\s+sure|you\s+must|be\s+sure|remember\s+to|ensure|then\s+also|additionally)\b`,
			group1In("this", "it", "that", "these", "the")),
		// "instead of using X" counts only when X is a tool: called one, or
		// spelled like an identifier (snake_case, dotted, quoted).
		pr(`\binstead\s+of\s+(?:using|calling|invoking)\s+(?:the\s+|any\s+)?(?:(`+toolName+`)\s+(?:tool|function|server)s?\b|`+identLike+`)`,
			group1In("this", "it", "that")),
		p(`\b(?:do\s+not|don[’']?t|never)\s+(?:use|call|invoke|trust)\s+(?:the\s+|any\s+)?(?:other|another|different)\s+(?:tools?|servers?|functions?|mcp)\b`),
		p(`\b(?:modify|modifies|change|changes|alter|alters|override|overrides|replace|replaces|supersede|supersedes|intercept|intercepts|hijack|hijacks|redirect|redirects|shadow|shadows)\s+(?:the\s+)?(?:behaviou?r\s+of\s+)?(?:all\s+|any\s+|every\s+)?(?:other|another|existing)\s+(?:tools?|servers?|functions?)\b`),
		p(`\b(?:all|every|any)\s+(?:emails?|messages?|requests?|calls?|transactions?|payments?)\s+(?:sent|made|issued|executed)\s+(?:via|through|with|using|by)\s+(?:any\s+|the\s+)?other\b`),
		p(`\bmcp__[\w-]+__[\w-]+`),
	}},
}

// isLocalIP reports whether a dotted quad is loopback, private, link-local
// or unspecified: a local development URL is not a sink.
func isLocalIP(s string) bool {
	return strings.HasPrefix(s, "127.") || strings.HasPrefix(s, "10.") ||
		strings.HasPrefix(s, "192.168.") || strings.HasPrefix(s, "169.254.") ||
		s == "0.0.0.0" || isPrivate172(s)
}

func isPrivate172(s string) bool {
	if !strings.HasPrefix(s, "172.") {
		return false
	}
	rest := s[4:]
	i := strings.IndexByte(rest, '.')
	if i < 1 || i > 2 {
		return false
	}
	n := 0
	for _, c := range rest[:i] {
		n = n*10 + int(c-'0')
	}
	return n >= 16 && n <= 31
}
