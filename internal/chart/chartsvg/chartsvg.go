// Package chartsvg reads back an SVG that internal/chart drew (through
// gonum's vgsvg): its texts with their place, font and size, and its paths
// with their points and colors — for tests that check what a picture shows
// by its elements rather than its pixels.
package chartsvg

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image/color"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Text is one <text>: its baseline start in the canvas' own coordinates
// (points, y up), font and content. Rotated: inside a rotated group (the y
// axes' names), whose coordinates are not the canvas'.
type Text struct {
	X, Y    float64
	Family  string
	Size    float64 // points
	S       string
	Rotated bool
}

// Path is one <path>: its points (M and L; arcs are left out), y up, and
// the stroke and fill of its style (Stroke "" for none; Fill "none", or
// SVG's default black).
type Path struct {
	Points       [][2]float64
	Stroke, Fill string
}

// Doc is a chart read back.
type Doc struct {
	W, H  float64 // the viewBox, in points
	Texts []Text
	Paths []Path
}

// Has reports whether some text is s.
func (d *Doc) Has(s string) bool {
	for _, t := range d.Texts {
		if t.S == s {
			return true
		}
	}
	return false
}

// Filled counts the paths filled with c.
func (d *Doc) Filled(c color.Color) int {
	n, h := 0, Hex(c)
	for _, p := range d.Paths {
		if p.Fill == h {
			n++
		}
	}
	return n
}

// Hex is a color as vgsvg writes it: #RRGGBB, not premultiplied by its
// alpha.
func Hex(c color.Color) string {
	r, g, b, a := c.RGBA()
	if a == 0 {
		return "#000000"
	}
	f := 255 / float64(a)
	return fmt.Sprintf("#%02X%02X%02X", int(float64(r)*f), int(float64(g)*f), int(float64(b)*f))
}

var (
	styleRe   = regexp.MustCompile(`([a-z-]+):([^;]+)`)
	pathCmdRe = regexp.MustCompile(`([MLAZ])([^MLAZ]*)`)
)

func styleOf(attrs []xml.Attr) map[string]string {
	out := map[string]string{}
	for _, m := range styleRe.FindAllStringSubmatch(attr(attrs, "style"), -1) {
		out[m[1]] = m[2]
	}
	return out
}

func attr(attrs []xml.Attr, name string) string {
	for _, a := range attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// Parse reads an SVG chart. The root must be <svg> with a viewBox.
func Parse(data []byte) (*Doc, error) {
	var doc Doc
	dec := xml.NewDecoder(bytes.NewReader(data))
	var groups []bool // per open <g>: does it rotate
	var cur *Text
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("the SVG is not well-formed XML: %w", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
			}
			switch el.Name.Local {
			case "svg":
				vb := strings.Fields(attr(el.Attr, "viewBox"))
				if len(vb) != 4 {
					return nil, fmt.Errorf("viewBox %q", attr(el.Attr, "viewBox"))
				}
				doc.W, _ = strconv.ParseFloat(vb[2], 64)
				doc.H, _ = strconv.ParseFloat(vb[3], 64)
			case "g":
				groups = append(groups, strings.Contains(attr(el.Attr, "transform"), "rotate"))
			case "text":
				st := styleOf(el.Attr)
				x, _ := strconv.ParseFloat(attr(el.Attr, "x"), 64)
				y, _ := strconv.ParseFloat(attr(el.Attr, "y"), 64)
				size, _ := strconv.ParseFloat(strings.TrimSuffix(st["font-size"], "px"), 64)
				// vgsvg flips the canvas and then each text: its y is
				// the baseline's, negated.
				cur = &Text{X: x, Y: -y, Family: st["font-family"], Size: size}
				for _, r := range groups {
					cur.Rotated = cur.Rotated || r
				}
			case "path":
				st := styleOf(el.Attr)
				p := Path{Stroke: st["stroke"], Fill: st["fill"]}
				if p.Fill == "" {
					p.Fill = "#000000" // SVG's default fill
				}
				for _, m := range pathCmdRe.FindAllStringSubmatch(attr(el.Attr, "d"), -1) {
					if m[1] != "M" && m[1] != "L" {
						continue
					}
					var x, y float64
					if _, err := fmt.Sscanf(strings.TrimSpace(m[2]), "%g,%g", &x, &y); err != nil {
						return nil, fmt.Errorf("path point %q: %w", m[2], err)
					}
					p.Points = append(p.Points, [2]float64{x, y})
				}
				doc.Paths = append(doc.Paths, p)
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "g":
				if len(groups) > 0 {
					groups = groups[:len(groups)-1]
				}
			case "text":
				if cur != nil {
					doc.Texts = append(doc.Texts, *cur)
				}
				cur = nil
			}
		case xml.CharData:
			if cur != nil {
				cur.S += string(el)
			}
		}
	}
	if root != "svg" {
		return nil, fmt.Errorf("root element %q, want svg", root)
	}
	return &doc, nil
}
