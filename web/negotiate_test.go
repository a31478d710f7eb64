package web_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ardx-dev/ardx/web"
)

func TestWantsHTML(t *testing.T) {
	tests := []struct {
		name   string
		accept []string
		want   bool
	}{
		{"no header", nil, false},
		{"curl", []string{"*/*"}, false},
		{"json", []string{"application/json"}, false},
		{"html", []string{"text/html"}, true},
		{"firefox", []string{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}, true},
		{"chrome", []string{"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"}, true},
		{"safari", []string{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}, true},
		{"json preferred by q", []string{"text/html;q=0.5, application/json"}, false},
		{"html preferred by q", []string{"application/json;q=0.4, text/html;q=0.9"}, true},
		{"explicit tie goes to html", []string{"application/json, text/html"}, true},
		{"html refused", []string{"text/html;q=0, */*"}, false},
		{"json refused, anything else", []string{"application/json;q=0, */*"}, true},
		{"json refused, html by wildcard", []string{"application/json;q=0, text/*"}, true},
		{"text wildcard beats any", []string{"text/*, */*;q=0.1"}, true},
		{"html named, json by wildcard", []string{"text/html, */*"}, true},
		{"application wildcard", []string{"application/*, text/html;q=0.5"}, false},
		{"xhtml counts as html", []string{"application/xhtml+xml"}, true},
		{"case and spaces", []string{" TEXT/HTML ; Q=1 , application/json ; q=0.2"}, true},
		{"params other than q", []string{"text/html;charset=utf-8;level=1"}, true},
		{"bad q ignored", []string{"text/html;q=2, application/json"}, false},
		{"bad q not a number", []string{"text/html;q=abc"}, false},
		{"several lines", []string{"application/json;q=0.1", "text/html"}, true},
		{"garbage", []string{"html"}, false},
		{"empty", []string{""}, false},
		{"most specific wins even if lower", []string{"text/html;q=0.1, text/*;q=1, application/json;q=0.5"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/status", nil)
			for _, a := range tc.accept {
				r.Header.Add("Accept", a)
			}
			if got := web.WantsHTML(r); got != tc.want {
				t.Fatalf("WantsHTML(%q) = %v, want %v", tc.accept, got, tc.want)
			}
		})
	}
}

func FuzzWantsHTML(f *testing.F) {
	f.Add("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	f.Add("application/json;q=0, text/*")
	f.Add(";;,/,*/*;q=")
	f.Fuzz(func(t *testing.T, accept string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Accept", accept)
		got := web.WantsHTML(r)
		// Adding an explicit, stronger JSON preference never makes HTML win.
		r.Header.Set("Accept", accept+",application/json;q=1")
		if got2 := web.WantsHTML(r); got2 && !got {
			t.Fatalf("adding JSON turned %q into HTML", accept)
		}
	})
}
