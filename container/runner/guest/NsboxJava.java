// nsbox's Java guest (container/runner/guest): one JShell whose snippets
// run in this JVM and stay from cell to cell. Each cell comes on stdin as
// fields, each a 10-digit byte count and the bytes: the marker, the number
// of environment variables, each name and value, the code. As E2B's Java
// kernel does, the environment is given as system properties (the
// sandbox's from the start, a cell's for that cell alone). The last
// expression's value is the cell's (a String as it is, anything else as
// JShell shows it). The marker ends the cell's stderr, then its stdout,
// which carries one JSON reply line. SIGINT stops the running cell.
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;
import jdk.jshell.*;

public class NsboxJava {
    static final InputStream IN = new BufferedInputStream(new FileInputStream(FileDescriptor.in));

    static String field() throws IOException {
        byte[] h = IN.readNBytes(10);
        if (h.length < 10) {
            System.exit(0);
        }
        int n = Integer.parseInt(new String(h, StandardCharsets.US_ASCII));
        return new String(IN.readNBytes(n), StandardCharsets.UTF_8);
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
                }
            }
        }
        return b.append('"').toString();
    }

    // unquote reads JShell's form of a String value (a Java literal).
    static String unquote(String v) {
        if (v == null || v.length() < 2 || v.charAt(0) != '"') return v;
        StringBuilder b = new StringBuilder();
        for (int i = 1; i < v.length() - 1; i++) {
            char c = v.charAt(i);
            if (c != '\\' || i + 1 >= v.length() - 1) {
                b.append(c);
                continue;
            }
            char e = v.charAt(++i);
            switch (e) {
                case 'n' -> b.append('\n');
                case 't' -> b.append('\t');
                case 'r' -> b.append('\r');
                case 'b' -> b.append('\b');
                case 'f' -> b.append('\f');
                case '0' -> b.append('\0');
                case 'u' -> {
                    b.append((char) Integer.parseInt(v.substring(i + 1, i + 5), 16));
                    i += 4;
                }
                default -> b.append(e);
            }
        }
        return b.toString();
    }

    static String typeOf(Snippet s) {
        if (s instanceof VarSnippet v) return v.typeName();
        if (s instanceof ExpressionSnippet x) return x.typeName();
        return "";
    }

    public static void main(String[] args) throws Exception {
        for (String a : args) { // the source's directory: the JVM has compiled it
            try (var d = Files.list(Path.of(a))) {
                for (Path p : d.toList()) Files.deleteIfExists(p);
            }
            Files.deleteIfExists(Path.of(a));
        }
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        PrintStream err = new PrintStream(new FileOutputStream(FileDescriptor.err), true, StandardCharsets.UTF_8);
        System.setOut(out);
        System.setErr(err);
        for (var e : System.getenv().entrySet()) {
            if (System.getProperty(e.getKey()) == null && !e.getKey().equals("NSBOX_GUEST_MARKER")) {
                System.setProperty(e.getKey(), e.getValue());
            }
        }
        JShell js = JShell.builder().executionEngine("local").out(out).err(err).build();
        sun.misc.Signal.handle(new sun.misc.Signal("INT"), s -> js.stop());
        js.eval("int __nsbox_warmup = 0;");
        out.print(System.getenv("NSBOX_GUEST_MARKER") + "{\"ready\":true}\n");
        out.flush();
        int count = 0;
        while (true) {
            String marker = field();
            int n = Integer.parseInt(field());
            Map<String, String> env = new LinkedHashMap<>();
            for (int i = 0; i < n; i++) env.put(field(), field());
            String code = field();
            count++;
            Map<String, String> saved = new HashMap<>();
            for (var e : env.entrySet()) {
                saved.put(e.getKey(), System.getProperty(e.getKey()));
                System.setProperty(e.getKey(), e.getValue());
            }
            String value = null, excName = null, excValue = null, tb = null;
            String rest = code;
            cell:
            while (!rest.isBlank()) {
                SourceCodeAnalysis.CompletionInfo ci = js.sourceCodeAnalysis().analyzeCompletion(rest);
                String src;
                if (ci.completeness().isComplete()) {
                    src = ci.source();
                    rest = ci.remaining();
                } else if (ci.completeness() == SourceCodeAnalysis.Completeness.EMPTY) {
                    break;
                } else {
                    src = rest;
                    rest = "";
                }
                value = null;
                for (SnippetEvent ev : js.eval(src)) {
                    if (ev.causeSnippet() != null) continue;
                    if (ev.status() == Snippet.Status.REJECTED) {
                        StringBuilder msg = new StringBuilder();
                        js.diagnostics(ev.snippet()).forEach(d -> msg.append(d.getMessage(Locale.ROOT)).append('\n'));
                        excName = "CompilationError";
                        excValue = msg.toString().strip();
                        tb = excValue + "\n" + ev.snippet().source();
                        break cell;
                    }
                    if (ev.exception() != null) {
                        Throwable x = ev.exception();
                        excName = x instanceof EvalException ee ? ee.getExceptionClassName() : x.getClass().getName();
                        excValue = Objects.toString(x.getMessage(), "");
                        StringWriter w = new StringWriter();
                        x.printStackTrace(new PrintWriter(w));
                        tb = w.toString();
                        break cell;
                    }
                    Snippet s = ev.snippet();
                    boolean expr = s.kind() == Snippet.Kind.EXPRESSION
                            || s.subKind() == Snippet.SubKind.TEMP_VAR_EXPRESSION_SUBKIND;
                    if (expr && ev.value() != null) {
                        value = typeOf(s).equals("String") ? unquote(ev.value()) : ev.value();
                    }
                }
            }
            for (var e : saved.entrySet()) {
                if (e.getValue() == null) System.clearProperty(e.getKey());
                else System.setProperty(e.getKey(), e.getValue());
            }
            out.flush();
            err.print(marker);
            err.flush();
            StringBuilder rep = new StringBuilder("{\"count\":").append(count);
            if (value != null) rep.append(",\"value\":").append(json(value));
            if (excName != null) {
                rep.append(",\"exception\":{\"name\":").append(json(excName)).append(",\"value\":").append(json(excValue))
                        .append(",\"traceback\":").append(json(tb)).append('}');
            }
            out.print(marker + rep + "}\n");
            out.flush();
        }
    }
}
