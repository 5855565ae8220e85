package links

import "bytes"

// attrScanner walks the attributes of a start tag's raw bytes (as
// html.Tokenizer.Raw returns them) by the Tokenizer's own rules, without
// the two copies per attribute that Tokenizer.TagAttr makes. It only
// handles tags without '&', NUL or CR, whose values the Tokenizer would
// return unchanged; FuzzAttrScanner checks it against TagAttr.
type attrScanner struct {
	raw []byte
	i   int
}

// newAttrScanner positions a scanner after the tag name; ok is false if the
// tag needs the Tokenizer's decoding (entities, NUL, CR).
func newAttrScanner(raw []byte) (s attrScanner, ok bool) {
	if bytes.IndexByte(raw, '&') >= 0 || bytes.IndexByte(raw, 0) >= 0 || bytes.IndexByte(raw, '\r') >= 0 {
		return s, false
	}
	i := 1 // after '<'
	for i < len(raw) {
		c := raw[i]
		if isSpace(c) {
			i++
			break
		}
		if c == '/' || c == '>' {
			break
		}
		i++
	}
	return attrScanner{raw: raw, i: i}, true
}

func (s *attrScanner) skipSpace() {
	for s.i < len(s.raw) && isSpace(s.raw[s.i]) {
		s.i++
	}
}

// next returns the next attribute with a non-empty key (as written; the
// Tokenizer lower-cases it) and its value.
func (s *attrScanner) next() (key, val []byte, ok bool) {
	raw := s.raw
	for {
		s.skipSpace()
		if s.i >= len(raw) || raw[s.i] == '>' {
			return nil, nil, false
		}
		start := s.i
		for s.i < len(raw) {
			c := raw[s.i]
			if c == '=' && s.i == start {
				s.i++ // a leading '=' belongs to the name
				continue
			}
			if isSpace(c) || c == '/' || c == '>' || c == '=' {
				break
			}
			s.i++
		}
		key, val = raw[start:s.i], nil
		s.skipSpace()
		if s.i < len(raw) {
			switch raw[s.i] {
			case '/':
				s.i++
			case '=':
				s.i++
				s.skipSpace()
				if s.i < len(raw) {
					switch q := raw[s.i]; q {
					case '>':
					case '"', '\'':
						s.i++
						vs := s.i
						for s.i < len(raw) && raw[s.i] != q {
							s.i++
						}
						val = raw[vs:s.i]
						if s.i < len(raw) {
							s.i++
						}
					default:
						vs := s.i
						for s.i < len(raw) && !isSpace(raw[s.i]) && raw[s.i] != '>' {
							s.i++
						}
						val = raw[vs:s.i]
					}
				}
			}
		}
		if len(key) > 0 {
			return key, val, true
		}
	}
}
