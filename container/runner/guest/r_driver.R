# nsbox's R guest (container/runner/guest): one R session whose global
# environment stays from cell to cell. Each cell comes on stdin as fields,
# each a 10-digit byte count and the bytes: the marker, the number of
# environment variables, each name and value, the code. The cell's
# variables are set for it alone. Every visible value is printed as R's
# console prints it; the last one is the cell's value. The marker ends the
# cell's stderr, then its stdout, which carries one JSON reply line.
local({
  con <- file("stdin", open = "rb")
  field <- function() {
    h <- readChar(con, 10L, useBytes = TRUE)
    if (length(h) == 0L || nchar(h, type = "bytes") < 10L) quit(save = "no", status = 0L)
    n <- as.integer(h)
    if (n == 0L) return("")
    s <- readChar(con, n, useBytes = TRUE)
    Encoding(s) <- "UTF-8"
    s
  }
  ctl <- setdiff(1:31, c(9L, 10L, 13L))
  js <- function(s) {
    s <- enc2utf8(paste(s, collapse = "\n"))
    s <- gsub("\\", "\\\\", s, fixed = TRUE)
    s <- gsub("\"", "\\\"", s, fixed = TRUE)
    s <- gsub("\n", "\\n", s, fixed = TRUE)
    s <- gsub("\r", "\\r", s, fixed = TRUE)
    s <- gsub("\t", "\\t", s, fixed = TRUE)
    for (i in ctl) s <- gsub(intToUtf8(i), sprintf("\\u%04x", i), s, fixed = TRUE)
    paste0("\"", s, "\"")
  }
  m0 <- Sys.getenv("NSBOX_GUEST_MARKER")
  Sys.unsetenv("NSBOX_GUEST_MARKER")
  cat(m0, "{\"ready\":true}\n", sep = "")
  count <- 0L
  repeat {
    marker <- field()
    env <- character(0)
    for (i in seq_len(as.integer(field()))) {
      k <- field()
      env[k] <- field()
    }
    code <- field()
    count <- count + 1L
    saved <- if (length(env)) Sys.getenv(names(env), unset = NA, names = TRUE) else character(0)
    if (length(env)) do.call(Sys.setenv, as.list(env))
    value <- NULL
    exc <- NULL
    tryCatch(withCallingHandlers({
      exprs <- parse(text = code, keep.source = FALSE)
      for (i in seq_along(exprs)) {
        r <- withVisible(eval(exprs[[i]], envir = globalenv()))
        if (r$visible) {
          out <- paste(capture.output(print(r$value)), collapse = "\n")
          if (i == length(exprs)) value <- out else cat(out, "\n", sep = "")
        }
      }
    }, warning = function(w) {
      message("Warning message:\n", conditionMessage(w))
      invokeRestart("muffleWarning")
    }), error = function(e) {
      call <- conditionCall(e)
      where <- if (is.null(call)) "" else paste0(" in ", deparse(call, nlines = 1L))
      exc <<- list(name = "Error", value = conditionMessage(e),
                   tb = paste0("Error", where, ": ", conditionMessage(e)))
    }, interrupt = function(i) {
      exc <<- list(name = "KeyboardInterrupt", value = "", tb = "")
    })
    for (k in names(saved)) {
      if (is.na(saved[[k]])) Sys.unsetenv(k) else do.call(Sys.setenv, setNames(list(saved[[k]]), k))
    }
    flush(stdout())
    cat(marker, file = stderr())
    flush(stderr())
    rep <- paste0("{\"count\":", count,
                  if (!is.null(value)) paste0(",\"value\":", js(value)),
                  if (!is.null(exc)) paste0(",\"exception\":{\"name\":", js(exc$name), ",\"value\":", js(exc$value),
                                            ",\"traceback\":", js(exc$tb), "}"),
                  "}")
    cat(marker, rep, "\n", sep = "")
    flush(stdout())
  }
})
