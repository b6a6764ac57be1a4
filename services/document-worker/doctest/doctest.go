// Package doctest makes test documents with known text — a PNG rendered
// with a real font, a PDF with a text layer, a scanned PDF (an image only) —
// and scores extracted text against the original. Tests and benchmarks of
// the worker and the e2e suite share it.
package doctest

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"strings"
	"unicode"

	"github.com/go-pdf/fpdf"
	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// Lines is Portuguese text the fixtures carry by default.
var Lines = []string{
	"Certidão de residência emitida pela prefeitura municipal.",
	"O requerente solicita a renovação do alvará de funcionamento",
	"da padaria situada na rua das Flores, número 120.",
	"A taxa de serviço foi paga no dia quinze de março.",
}

// PNG renders lines black on white with the Go font at sizePx pixels per
// em (tesseract reads reliably from about 30).
func PNG(lines []string, sizePx float64) ([]byte, error) {
	f, err := opentype.Parse(goregular.TTF)
	if err != nil {
		return nil, fmt.Errorf("parse font: %w", err)
	}
	face, err := opentype.NewFace(f, &opentype.FaceOptions{Size: sizePx, DPI: 72, Hinting: font.HintingFull})
	if err != nil {
		return nil, fmt.Errorf("font face: %w", err)
	}
	defer face.Close()
	lineHeight := int(sizePx * 1.6)
	margin := int(sizePx)
	width := 0
	for _, l := range lines {
		width = max(width, font.MeasureString(face, l).Ceil())
	}
	img := image.NewGray(image.Rect(0, 0, width+2*margin, lineHeight*len(lines)+2*margin))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	d := &font.Drawer{Dst: img, Src: image.NewUniform(color.Black), Face: face}
	for i, l := range lines {
		d.Dot = fixed.P(margin, margin+lineHeight*(i+1)-lineHeight/3)
		d.DrawString(l)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("encode png: %w", err)
	}
	return buf.Bytes(), nil
}

// TextPDF writes lines as a one-page PDF with a text layer.
func TextPDF(lines []string) ([]byte, error) {
	pdf := fpdf.New("P", "mm", "A4", "")
	tr := pdf.UnicodeTranslatorFromDescriptor("") // UTF-8 → cp1252 for the core fonts
	pdf.AddPage()
	pdf.SetFont("Helvetica", "", 14)
	for _, l := range lines {
		pdf.Cell(0, 10, tr(l))
		pdf.Ln(10)
	}
	var buf bytes.Buffer
	if err := pdf.Output(&buf); err != nil {
		return nil, fmt.Errorf("write pdf: %w", err)
	}
	return buf.Bytes(), nil
}

// ScannedPDF wraps a PNG page image in a PDF with no text layer, as a
// scanner would produce.
func ScannedPDF(pngData []byte) ([]byte, error) {
	cfg, err := png.DecodeConfig(bytes.NewReader(pngData))
	if err != nil {
		return nil, fmt.Errorf("png: %w", err)
	}
	pdf := fpdf.New("P", "mm", "A4", "")
	pdf.AddPage()
	pdf.RegisterImageOptionsReader("scan", fpdf.ImageOptions{ImageType: "PNG"}, bytes.NewReader(pngData))
	// 190 mm wide; the image keeps its aspect ratio.
	w := 190.0
	h := w * float64(cfg.Height) / float64(cfg.Width)
	pdf.ImageOptions("scan", 10, 10, w, h, false, fpdf.ImageOptions{ImageType: "PNG"}, 0, "")
	var buf bytes.Buffer
	if err := pdf.Output(&buf); err != nil {
		return nil, fmt.Errorf("write pdf: %w", err)
	}
	return buf.Bytes(), nil
}

// Words splits text into lowercase words without punctuation.
func Words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// WordAccuracy is the share of want's words that got reproduces in order
// (longest common subsequence of words over the number of wanted words).
func WordAccuracy(want, got string) float64 {
	a, b := Words(want), Words(got)
	if len(a) == 0 {
		return 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			switch {
			case a[i-1] == b[j-1]:
				cur[j] = prev[j-1] + 1
			case prev[j] >= cur[j-1]:
				cur[j] = prev[j]
			default:
				cur[j] = cur[j-1]
			}
		}
		prev, cur = cur, prev
	}
	return float64(prev[len(b)]) / float64(len(a))
}

// Degraded renders lines small (18 px per em) and sprinkles the page with
// salt-and-pepper noise on a share of its pixels, like a poor scan. seed
// makes the noise repeatable.
func Degraded(lines []string, noise float64, seed uint64) ([]byte, error) {
	clean, err := PNG(lines, 18)
	if err != nil {
		return nil, err
	}
	src, err := png.Decode(bytes.NewReader(clean))
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	img := image.NewGray(src.Bounds())
	draw.Draw(img, img.Bounds(), src, image.Point{}, draw.Src)
	x := seed | 1
	for i := range img.Pix {
		// xorshift: a deterministic, dependency-free noise source.
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if float64(x%10000)/10000 < noise {
			img.Pix[i] = uint8(x>>32) & 0x80 * 2 // black or white
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("encode png: %w", err)
	}
	return buf.Bytes(), nil
}
