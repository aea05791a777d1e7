// Package orphan holds one of each doc comment shape the checker knows.
package orphan

// Cut is cut off from its declaration by a blank line.

func Cut() {}

// Between has another declaration between it and its own.
var unrelated = 1

func Between() {}

// Stray is the doc of a function that went away.
// Kept is documented after a stray line.
func Kept() {}

// Stray is here so that the stray line names a declaration of the package.
var Stray = 2

// renamed is the doc of Renamed from before a rename.
func Renamed() {}

const (
	// First is cut off inside a group.

	First = 1
	// Second is a spec's doc, attached.
	Second = 2
)

// Good is an ordinary doc.
func Good() {
	// Good is a comment inside a body, not a doc.
	_ = 0
}

// A Typed is documented with an article.
type Typed struct {
	// Field is a field's doc.

	Field int
}

// Section: nothing below is named Section.

func Far()      {}
func Farther()  {}
func Farthest() {}

// Farthest2 is three declarations below, too far to be its doc.

var z = 3
var w = 4

func Farthest2() {}

// Grouped and Grouped2 are documented together, as a group.
const (
	Grouped  = 1
	Grouped2 = 2
)
