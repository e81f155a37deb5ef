package sqlcheck

import "google.golang.org/protobuf/reflect/protoreflect"

// Visit calls fn on every message of a parse tree, depth first; fn
// returning false skips the message's children.
func Visit(m protoreflect.Message, fn func(protoreflect.Message) bool) {
	if !fn(m) {
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				Visit(l.Get(i).Message(), fn)
			}
		case fd.IsMap():
		case fd.Message() != nil:
			Visit(v.Message(), fn)
		}
		return true
	})
}
