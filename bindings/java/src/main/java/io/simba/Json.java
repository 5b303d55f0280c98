package io.simba;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** A small JSON reader for the library's snapshots: objects, arrays, strings, numbers, booleans, null. */
final class Json {
  private final String s;
  private int i;

  private Json(String s) {
    this.s = s;
  }

  static Object parse(String s) {
    Json j = new Json(s);
    Object v = j.value();
    j.ws();
    if (j.i != s.length()) throw j.err("trailing data");
    return v;
  }

  private IllegalArgumentException err(String what) {
    return new IllegalArgumentException("bad JSON at " + i + ": " + what);
  }

  private void ws() {
    while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
  }

  private Object value() {
    ws();
    if (i >= s.length()) throw err("end of input");
    char c = s.charAt(i);
    if (c == '{') {
      Map<String, Object> m = new LinkedHashMap<>();
      i++;
      ws();
      if (peek('}')) return m;
      do {
        ws();
        String k = string();
        ws();
        expect(':');
        m.put(k, value());
        ws();
      } while (peek(','));
      expect('}');
      return m;
    }
    if (c == '[') {
      List<Object> l = new ArrayList<>();
      i++;
      ws();
      if (peek(']')) return l;
      do {
        l.add(value());
        ws();
      } while (peek(','));
      expect(']');
      return l;
    }
    if (c == '"') return string();
    if (s.startsWith("true", i)) { i += 4; return Boolean.TRUE; }
    if (s.startsWith("false", i)) { i += 5; return Boolean.FALSE; }
    if (s.startsWith("null", i)) { i += 4; return null; }
    int st = i;
    while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
    if (st == i) throw err("unexpected " + c);
    String n = s.substring(st, i);
    if (n.contains(".") || n.contains("e") || n.contains("E")) return Double.parseDouble(n);
    return Long.parseLong(n);
  }

  private boolean peek(char c) {
    if (i < s.length() && s.charAt(i) == c) {
      i++;
      return true;
    }
    return false;
  }

  private void expect(char c) {
    if (!peek(c)) throw err("expected " + c);
  }

  private String string() {
    expect('"');
    StringBuilder b = new StringBuilder();
    while (true) {
      if (i >= s.length()) throw err("open string");
      char c = s.charAt(i++);
      if (c == '"') return b.toString();
      if (c != '\\') {
        b.append(c);
        continue;
      }
      char e = s.charAt(i++);
      switch (e) {
        case 'n': b.append('\n'); break;
        case 't': b.append('\t'); break;
        case 'r': b.append('\r'); break;
        case 'b': b.append('\b'); break;
        case 'f': b.append('\f'); break;
        case 'u': b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
        default: b.append(e);
      }
    }
  }
}
