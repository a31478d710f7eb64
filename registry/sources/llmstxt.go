package sources

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"
)

// ErrNotLLMsTxt means a document is not an llms.txt (no H1 title, or HTML).
var ErrNotLLMsTxt = errors.New("not an llms.txt file")

// Bounds on one llms.txt.
const (
	maxLLMsLinks    = 2000
	maxLLMsLineLen  = 64 << 10
	maxLLMsSections = 500
)

// Link kinds: what a link of an llms.txt points at, judged from its URL.
const (
	LinkDoc         = "doc"          // documentation: context only
	LinkOpenAPI     = "openapi"      // an API description: follow with ReadAPI
	LinkMCPEndpoint = "mcp-endpoint" // an MCP endpoint: follow with ReadMCP
	LinkMCPCard     = "mcp-card"     // an MCP server card: an entry
	LinkA2ACard     = "a2a-card"     // an A2A agent card: an entry
	LinkCatalog     = "catalog"      // an ARD manifest: follow with ingestion
	LinkSkill       = "skill"        // an Agent Skill (SKILL.md or archive): an entry
)

// LLMsTxt is a parsed llms.txt (https://llmstxt.org).
type LLMsTxt struct {
	URL      string
	Title    string // the H1
	Summary  string // the blockquote
	Details  string // text between the summary and the first H2
	Sections []LLMsSection
}

// LLMsSection is one H2 section and its link list.
type LLMsSection struct {
	Name     string
	Optional bool // the section named "Optional": links a reader may skip
	Links    []Link
}

// Link is one "- [name](url): notes" item.
type Link struct {
	Name  string
	URL   string // absolute
	Notes string
	Kind  string // one of the Link* kinds
}

var linkItem = regexp.MustCompile(`^\s*[-*+]\s+\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)\s*(?::\s*(.*))?$`)

// ParseLLMsTxt parses an llms.txt: the H1 title (required), the blockquote
// summary, free text, and H2 sections of link lists. Relative links resolve
// against docURL; links that are not http(s) are dropped.
func ParseLLMsTxt(body []byte, docURL string) (*LLMsTxt, error) {
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("%w: not UTF-8 text", ErrNotLLMsTxt)
	}
	trimmed := bytes.TrimSpace(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")))
	if len(trimmed) > 0 && trimmed[0] == '<' {
		return nil, fmt.Errorf("%w: looks like HTML", ErrNotLLMsTxt)
	}
	doc := &LLMsTxt{URL: docURL}
	sc := bufio.NewScanner(bytes.NewReader(trimmed))
	sc.Buffer(make([]byte, 0, 64<<10), maxLLMsLineLen)
	var summary, details []string
	var cur *LLMsSection
	links := 0
	state := "start" // start, summary, details, sections
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		switch {
		case state == "start":
			if line == "" {
				continue
			}
			t, ok := strings.CutPrefix(line, "# ")
			if !ok || strings.TrimSpace(t) == "" {
				return nil, fmt.Errorf("%w: the first line is not an H1 title", ErrNotLLMsTxt)
			}
			doc.Title = collapseSpace(t)
			state = "summary"
			continue
		case strings.HasPrefix(line, "## "):
			if len(doc.Sections) == maxLLMsSections {
				return doc, nil
			}
			name := collapseSpace(line[3:])
			doc.Sections = append(doc.Sections, LLMsSection{Name: name, Optional: strings.EqualFold(name, "optional")})
			cur = &doc.Sections[len(doc.Sections)-1]
			state = "sections"
			continue
		case state == "summary":
			if q, ok := strings.CutPrefix(line, ">"); ok {
				summary = append(summary, strings.TrimSpace(q))
				continue
			}
			if line == "" && len(summary) == 0 {
				continue
			}
			state = "details"
		}
		switch state {
		case "details":
			details = append(details, line)
		case "sections":
			m := linkItem.FindStringSubmatch(line)
			if m == nil || links == maxLLMsLinks {
				continue
			}
			abs, err := resolveAbs(docURL, m[2])
			if err != nil {
				continue
			}
			links++
			l := Link{Name: collapseSpace(m[1]), URL: abs, Notes: collapseSpace(m[3])}
			l.Kind = classifyLink(abs, cur.Name)
			cur.Links = append(cur.Links, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotLLMsTxt, err)
	}
	if doc.Title == "" {
		return nil, fmt.Errorf("%w: no H1 title", ErrNotLLMsTxt)
	}
	doc.Summary = collapseSpace(strings.Join(summary, " "))
	doc.Details = strings.TrimSpace(strings.Join(details, "\n"))
	return doc, nil
}

// classifyLink judges what a link points at from its URL (and, for
// markdown files, its section): llms.txt carries no types, so this is a
// heuristic, and anything unrecognised is documentation.
func classifyLink(rawURL, section string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return LinkDoc
	}
	p := strings.ToLower(strings.TrimSuffix(u.Path, "/"))
	base := path.Base(p)
	ext := path.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	switch {
	case (stem == "openapi" || stem == "swagger" || strings.HasPrefix(stem, "openapi.") || strings.HasPrefix(stem, "openapi-")) &&
		(ext == ".json" || ext == ".yaml" || ext == ".yml"):
		return LinkOpenAPI
	case base == "server-card.json" || base == "server-card" || p == "/.well-known/mcp.json":
		return LinkMCPCard
	case base == "agent-card.json" || p == "/.well-known/agent.json":
		return LinkA2ACard
	case base == "ard.json" || base == "ai-catalog.json" || p == "/.well-known/mcp/catalog.json":
		return LinkCatalog
	case base == "skill.md":
		return LinkSkill
	case (ext == ".zip" || ext == ".skill") && strings.Contains(p, "skill"):
		return LinkSkill
	case ext == ".md" && strings.Contains(strings.ToLower(section), "skill") && strings.Contains(p, "skill"):
		return LinkSkill
	case base == "mcp" || base == "sse" && strings.Contains(p, "mcp"):
		return LinkMCPEndpoint
	}
	return LinkDoc
}

// Follow lists the links a manifest builder should read further with the
// other readers: API descriptions, MCP endpoints and ARD manifests. They
// get no entry of their own here, because reading them yields better ones.
func (doc *LLMsTxt) Follow() []Link {
	var out []Link
	for _, s := range doc.Sections {
		for _, l := range s.Links {
			switch l.Kind {
			case LinkOpenAPI, LinkMCPEndpoint, LinkCatalog:
				out = append(out, l)
			}
		}
	}
	return out
}

// LLMsTxtEntries makes entries of the links whose URL is itself the
// artifact an ARD entry points at: Agent Skills, MCP server cards and A2A
// agent cards. Documentation links stay context (in the LLMsTxt), and
// links to follow are listed by Follow. domain anchors the identifiers;
// empty means the host of the llms.txt.
func LLMsTxtEntries(doc *LLMsTxt, domain string, prov Provenance) (*Result, error) {
	if domain == "" {
		domain = domainOf(firstNonEmpty(prov.URL, doc.URL))
	}
	d, ok := normalizeDomain(domain)
	if !ok {
		return nil, fmt.Errorf("sources: %q cannot anchor an identifier (a fully qualified domain name is needed)", domain)
	}
	res := &Result{}
	ids := idSet{}
	for _, s := range doc.Sections {
		for _, l := range s.Links {
			var typ, ns string
			switch l.Kind {
			case LinkSkill:
				ns, typ = "skill", TypeSkillMarkdown
				if strings.HasSuffix(strings.ToLower(l.URL), ".zip") {
					typ = TypeSkillZip
				}
			case LinkMCPCard:
				ns, typ = "mcp", TypeMCPServer
			case LinkA2ACard:
				ns, typ = "agent", TypeA2AAgent
			default:
				continue
			}
			name := slug(l.Name)
			if name == "" {
				name = slug(strings.TrimSuffix(path.Base(l.URL), path.Ext(l.URL)))
			}
			e := Entry{
				Identifier:            ids.unique("urn:air:"+d+":"+ns+":", name),
				DisplayName:           firstNonEmpty(l.Name, path.Base(l.URL)),
				Type:                  typ,
				URL:                   l.URL,
				Description:           clip(l.Notes, maxDescriptionLen),
				RepresentativeQueries: queries(l.Name, firstSentence(l.Notes)),
				Metadata:              prov.metadata("llms.txt"),
			}
			if s.Name != "" {
				e.Tags = []string{s.Name}
				e.Metadata["llms.section"] = s.Name
			}
			if s.Optional {
				e.Metadata["llms.optional"] = true
			}
			res.Entries = append(res.Entries, e)
			warnQueries(res, e)
		}
	}
	return res, nil
}
