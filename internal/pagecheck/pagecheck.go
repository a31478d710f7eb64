// Package pagecheck renders a service's HTML pages in headless Chromium and
// checks that a person can read them: every piece of text must meet the
// WCAG AA contrast ratio against the background it is painted on, as the
// browser computes both.
package pagecheck

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// MinContrast is WCAG 2's AA ratio for normal text.
const MinContrast = 4.5

// Low is a piece of text below MinContrast.
type Low struct {
	Text       string  `json:"text"`
	Tag        string  `json:"tag"`
	Color      string  `json:"color"`
	Background string  `json:"background"`
	Ratio      float64 `json:"ratio"`
}

// Result is what the browser measured on one page.
type Result struct {
	Texts int   `json:"texts"`
	Low   []Low `json:"low"`
}

// probePath serves the page that frames the page under test from the same
// origin and measures it.
const probePath = "/__pagecheck"

// The probe walks every element that holds text of its own, takes its
// computed color and the first opaque background behind it (blending
// translucent ones on the way), and computes the WCAG contrast ratio.
const probeHTML = `<!doctype html><html><body><iframe id="f" style="width:1200px;height:1600px"></iframe><pre id="result">pending</pre>
<script>
function rgba(s){const m=s.match(/[\d.]+/g)||[0,0,0,0];return [+m[0],+m[1],+m[2],m.length>3?+m[3]:1]}
function lum(c){const f=v=>{v/=255;return v<=0.03928?v/12.92:Math.pow((v+0.055)/1.055,2.4)};return 0.2126*f(c[0])+0.7152*f(c[1])+0.0722*f(c[2])}
function over(top,bottom){const a=top[3];return [top[0]*a+bottom[0]*(1-a),top[1]*a+bottom[1]*(1-a),top[2]*a+bottom[2]*(1-a),1]}
function background(win,el){const layers=[];for(let e=el;e;e=e.parentElement){const c=rgba(win.getComputedStyle(e).backgroundColor);if(c[3]>0){layers.push(c);if(c[3]>=1)break}}
 let bg=[255,255,255,1];for(let i=layers.length-1;i>=0;i--)bg=over(layers[i],bg);return bg}
document.getElementById("f").onload=function(){
 const win=this.contentWindow,doc=this.contentDocument;const out={texts:0,low:[]};
 for(const el of doc.body.querySelectorAll("*")){
  const own=[...el.childNodes].filter(n=>n.nodeType===3).map(n=>n.textContent).join("").trim();
  if(!own)continue;const cs=win.getComputedStyle(el);if(cs.visibility==="hidden"||cs.display==="none")continue;
  out.texts++;const bg=background(win,el);const fg=over(rgba(cs.color),bg);
  const l1=lum(fg),l2=lum(bg);const ratio=(Math.max(l1,l2)+0.05)/(Math.min(l1,l2)+0.05);
  if(ratio<MIN)out.low.push({text:own.slice(0,60),tag:el.tagName.toLowerCase(),color:cs.color,background:"rgb("+bg.slice(0,3).map(Math.round).join(", ")+")",ratio:Math.round(ratio*100)/100});
 }
 document.getElementById("result").textContent=JSON.stringify(out);
};
document.getElementById("f").src=new URLSearchParams(location.search).get("page");
</script></body></html>`

// Browser returns the path of a headless Chromium, skipping the test when
// there is none outside CI (CI installs it).
func Browser(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		tb.Fatal("chromium is missing in CI; .ci/run installs it")
	}
	tb.Skip("chromium not installed (Debian: apt-get install -y chromium); skipping the browser check")
	return ""
}

// Check renders each path of h (requested as a browser does) in Chromium,
// fails the test for every piece of text under MinContrast, and saves a
// screenshot of each page to $ARDX_SCREENSHOT_DIR when it is set.
func Check(tb testing.TB, h http.Handler, paths ...string) map[string]Result {
	tb.Helper()
	bin := Browser(tb)
	mux := http.NewServeMux()
	mux.HandleFunc(probePath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(strings.Replace(probeHTML, "MIN", fmt.Sprint(MinContrast), 1)))
	})
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Chromium asks for HTML; the service's negotiation decides.
		h.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	results := map[string]Result{}
	for _, path := range paths {
		dom := Run(tb, bin, "--virtual-time-budget=10000", "--dump-dom", srv.URL+probePath+"?page="+path)
		m := resultRE.FindStringSubmatch(dom)
		if m == nil {
			tb.Fatalf("%s: the contrast probe did not finish; the page did not load in the frame", path)
		}
		var res Result
		if err := json.Unmarshal([]byte(unescapeHTML(m[1])), &res); err != nil {
			tb.Fatalf("%s: probe result %q: %v", path, m[1], err)
		}
		if res.Texts == 0 {
			tb.Errorf("%s: the browser found no text on the page", path)
		}
		for _, l := range res.Low {
			tb.Errorf("%s: %q (<%s>) has contrast %.2f:1, under %.1f:1: %s on %s", path, l.Text, l.Tag, l.Ratio, MinContrast, l.Color, l.Background)
		}
		if dir := os.Getenv("ARDX_SCREENSHOT_DIR"); dir != "" {
			name := strings.Trim(regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(path, "_"), "_") + ".png"
			Run(tb, bin, "--window-size=1200,1600", "--screenshot="+filepath.Join(dir, name), srv.URL+path)
		}
		results[path] = res
	}
	return results
}

var resultRE = regexp.MustCompile(`(?s)<pre id="result">(.*?)</pre>`)

func unescapeHTML(s string) string {
	return strings.NewReplacer("&quot;", `"`, "&lt;", "<", "&gt;", ">", "&#39;", "'", "&amp;", "&").Replace(s)
}

// Run runs headless Chromium bin with args (after the flags every run
// needs) and returns its standard output, failing the test on an error.
func Run(tb testing.TB, bin string, args ...string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + tb.TempDir(), "--window-size=1200,1600"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}
