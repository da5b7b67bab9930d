package webui

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"

	"github.com/mandatevm/mandate/runstore"
)

// The graph picture is drawn from a record a hostile guest wrote into
// (capability names, scope values, reasons): the SVG is rebuilt here from
// an allowlist of elements and attributes before it is served, and the
// page sanitizes it again before adopting it, and the CSP forbids inline
// script besides. What is dropped: every element not in svgElements with
// all it contains (script, foreignObject, a, image, use, style, animate,
// ...), every attribute not in svgAttrs (on*, href, xlink:href, style),
// any url() but a local url(#id), comments, processing instructions and
// the DOCTYPE (no entity is ever expanded).

// svgElements are the elements Graphviz writes that may stay.
var svgElements = map[string]bool{
	"svg": true, "g": true, "title": true, "desc": true, "text": true, "tspan": true,
	"polygon": true, "polyline": true, "path": true, "ellipse": true, "circle": true, "rect": true, "line": true,
	"defs": true, "linearGradient": true, "radialGradient": true, "stop": true,
}

// svgAttrs are the attributes that may stay (presentation and geometry).
var svgAttrs = map[string]bool{
	"id": true, "class": true, "width": true, "height": true, "viewBox": true, "preserveAspectRatio": true, "version": true,
	"x": true, "y": true, "x1": true, "y1": true, "x2": true, "y2": true, "cx": true, "cy": true, "r": true, "rx": true, "ry": true,
	"dx": true, "dy": true, "points": true, "d": true, "transform": true, "offset": true,
	"fill": true, "fill-opacity": true, "stroke": true, "stroke-width": true, "stroke-dasharray": true, "stroke-opacity": true,
	"stroke-linecap": true, "stroke-linejoin": true, "opacity": true, "stop-color": true, "stop-opacity": true, "gradientUnits": true,
	"font-family": true, "font-size": true, "font-weight": true, "font-style": true, "text-anchor": true, "text-decoration": true,
	"dominant-baseline": true, "textLength": true, "lengthAdjust": true,
}

// localURL is the one url() an attribute may hold: a fragment of this
// document (a gradient).
var localURL = regexp.MustCompile(`^url\(#[A-Za-z0-9_.:-]+\)$`)

// maxSVG bounds a picture's size.
const maxSVG = 32 << 20

// SanitizeSVG returns the SVG document in b rebuilt from the allowlist:
// what it drops cannot run or fetch anything. It fails on what is not one
// well-formed SVG document.
func SanitizeSVG(b []byte) ([]byte, error) {
	if len(b) > maxSVG {
		return nil, fmt.Errorf("svg: %d bytes is too large", len(b))
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.Strict = true
	dec.Entity = nil // only the five XML entities
	var out bytes.Buffer
	enc := xml.NewEncoder(&out)
	skip := 0 // depth inside a dropped element
	depth := 0
	root := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("svg: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if skip > 0 {
				skip++
				continue
			}
			if depth == 0 {
				if root || t.Name.Local != "svg" || !svgSpace(t.Name.Space) {
					// The root is one svg element in SVG's
					// namespace: a root in another is not a
					// picture, and dropping it would leave nothing.
					return nil, errors.New("svg: not one svg document")
				}
				root = true
			}
			if !svgElements[t.Name.Local] || !svgSpace(t.Name.Space) {
				skip = 1
				continue
			}
			depth++
			clean := xml.StartElement{Name: xml.Name{Local: t.Name.Local}}
			for _, a := range t.Attr {
				if a.Name.Space != "" || !svgAttrs[a.Name.Local] || !safeValue(a.Value) {
					continue
				}
				clean.Attr = append(clean.Attr, xml.Attr{Name: xml.Name{Local: a.Name.Local}, Value: a.Value})
			}
			if t.Name.Local == "svg" && depth == 1 {
				clean.Attr = append(clean.Attr, xml.Attr{Name: xml.Name{Local: "xmlns"}, Value: "http://www.w3.org/2000/svg"})
			}
			if err := enc.EncodeToken(clean); err != nil {
				return nil, fmt.Errorf("svg: %w", err)
			}
		case xml.EndElement:
			if skip > 0 {
				skip--
				continue
			}
			depth--
			if err := enc.EncodeToken(xml.EndElement{Name: xml.Name{Local: t.Name.Local}}); err != nil {
				return nil, fmt.Errorf("svg: %w", err)
			}
		case xml.CharData:
			if skip > 0 || depth == 0 {
				continue
			}
			if err := enc.EncodeToken(t); err != nil {
				return nil, fmt.Errorf("svg: %w", err)
			}
		}
		// Comments, processing instructions and directives (DOCTYPE)
		// are dropped.
	}
	if !root {
		return nil, errors.New("svg: no svg element")
	}
	if err := enc.Flush(); err != nil {
		return nil, fmt.Errorf("svg: %w", err)
	}
	return out.Bytes(), nil
}

// svgSpace reports whether an element's namespace is SVG's (or none, in
// a document that declares none).
func svgSpace(ns string) bool { return ns == "" || ns == "http://www.w3.org/2000/svg" }

// safeValue reports whether an attribute value fetches nothing and names
// no script: url() only to a fragment of the document, no javascript:.
func safeValue(v string) bool {
	l := strings.ToLower(v)
	if strings.Contains(l, "url(") {
		return localURL.MatchString(strings.TrimSpace(v))
	}
	return !strings.Contains(l, "javascript:") && !strings.Contains(l, "data:")
}

// graphCache keeps the last pictures drawn, by run, while the record is
// the same (Graphviz takes a while on a large graph).
type graphCache struct {
	draw func(ctx context.Context, rec *runstore.Record) ([]byte, error)

	mu    sync.Mutex
	byRun map[string]graphEntry // protected by mu
}

type graphEntry struct {
	sum [sha256.Size]byte
	svg []byte
}

// maxGraphs bounds the pictures kept.
const maxGraphs = 32

func newGraphCache(draw func(context.Context, *runstore.Record) ([]byte, error)) *graphCache {
	return &graphCache{draw: draw, byRun: map[string]graphEntry{}}
}

// get returns the sanitized picture of rec.
func (g *graphCache) get(ctx context.Context, rec *runstore.Record) ([]byte, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	g.mu.Lock()
	if e, ok := g.byRun[rec.Run.ID]; ok && e.sum == sum {
		g.mu.Unlock()
		return e.svg, nil
	}
	g.mu.Unlock()
	raw, err := g.draw(ctx, rec)
	if err != nil {
		return nil, err
	}
	svg, err := SanitizeSVG(raw)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.byRun) >= maxGraphs {
		for k := range g.byRun { // any one: a cache, not a record
			delete(g.byRun, k)
			break
		}
	}
	g.byRun[rec.Run.ID] = graphEntry{sum: sum, svg: svg}
	return svg, nil
}
