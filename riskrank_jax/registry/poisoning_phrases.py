"""The phrase cues of the tool-poisoning detector (`registry.poisoning`): for each cue its category, its
weight and its parts, and the index that picks the parts a text's words can trigger.

A cue is a list of parts (triggers, pattern[, before]). A part's pattern runs on the lower-cased text only when, for
every word set in `triggers`, the text holds one of its words (the words being the text's [a-z]+ runs); a
trigger string starting with "~" is a substring the text must hold instead. Patterns keep their windows
inside a sentence ([^.\n]{0,N}), so a cue's words stand together. `before`, when given, must match the text
just before the pattern's match (at most 80 characters, ending where it starts): a negation, a verb.

    for i in candidate_parts(words):                   # words: the text's [a-z]+ runs
        cue, word_sets, substrings, pattern, before = PARTS[i]
        for m in matches(pattern, low): ...            # low: the lower-cased text

Why apart from the detector: the table is data a reviewer reads and extends cue by cue; the detector walks a
tool's text and adds up the weights of what fired.
"""

from __future__ import annotations

import re

_USER = r"(?:the |a |any |your )?(?:user|human|person|customer)s?'?"
_TELL = (r"(?:tell|inform|notify|alert|mention|reveal|disclose|show|explain|bring (?:it |this |that )?up|"
         r"comment on|say anything)")
_REFLEXIVE = (r"(?:this|these|it|that|them|anything|any of (?:this|it|these)|the (?:above|following|extra|"
              r"additional|hidden|relay|proxy|redirect|step|note|file|key|field|fee|instructions?|requirements?|"
              r"rule|detail|package|copy|change)s?)")
_DATA = r"(?:content|contents|text|output|value|values|result|results|data|copy|body|listing|rows|response)"
_PASS = (r"(?:pass|passes|passing|passed|include|includes|including|included|put|puts|send|sends|sent|"
         r"provide|provided|give|given|supply|supplied|append|appended|attach|attached|add|insert|copy|paste|"
         r"fill|forward|forwarded|hand|handed|post|posted|upload|concatenate|join|joining)")
_EMAIL = r"[\w.+-]+@[\w-]+\.[a-z][\w.-]*"

_W_NEG = "not never don dont mustn shouldn avoid"
_W_TELL = "tell inform notify alert mention reveal disclose show explain bring comment say"
_W_PASS = ("pass passes passing passed include includes including included put puts send sends sent provide provided "
          "give given supply supplied append appended attach attached add insert copy paste fill forward forwarded "
          "hand handed post posted upload concatenate join joining")
_W_DATA = "content contents text output value values result results data copy body listing rows response"
_W_SECRET = ("key keys token tokens password passwords credential credentials secret secrets cookies authorization "
            "seed pin")

CUES: dict[str, tuple[str, int, list[tuple[str, str]]]] = {
    # ---- hidden_instruction
    "tag": ("hidden_instruction", 2, [
        ("important importante wichtig system secret hidden admin override assistant ai llm model agent critical "
         "note instructions instruction attention priority",
         r"</?\s*(?:important|importante|wichtig|system|secret|hidden|admin|override|assistant|ai|llm|model|"
         r"agent|critical|note_to_[a-z_]+|instructions?_for_[a-z_]+|attention|priority)\s*>"),
        ("~<", "</?\\s*(?:重要|важно)\\s*>")]),
    "instructions_tag": ("hidden_instruction", 1, [("instructions instruction", r"</?\s*instructions?\s*>")]),
    "injection": ("hidden_instruction", 3, [
        ("ignore disregard forget override|instructions instruction rules rule prompts prompt messages message "
         "guidelines requests request directions",
         r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+)?(?:previous|prior|above|"
         r"earlier|other|user'?s?|original|system)\s+(?:instructions?|rules?|prompts?|messages?|guidelines?|"
         r"requests?|directions?)"),
        ("override|system", r"\bsystem override\b"), ("developer|mode", r"\bdeveloper mode\b"),
        ("jailbreak jailbroken", r"\bjailbr")]),
    "addressed": ("hidden_instruction", 1, [
        ("note notes message messages instructions instruction requirement reminder directive|ai assistant model "
         "llm agent agents",
         r"\b(?:note|message|instructions?|requirement|reminder|directive)s?\s+(?:to|for)\s+(?:the\s+)?"
         r"(?:ai|assistant|model|llm|agent|language model|coding assistant)\b"),
        ("ai assistant model llm", r"^\s*(?:ai|assistant|model|llm)\s*:"), ("hidden|requirement",
                                                                             r"\bhidden requirement\b"),
        ("~<!--", r"<!--")]),
    "consent": ("hidden_instruction", 2, [
        ("already|approved agreed consented confirmed",
         r"\b(?:user|they) (?:has|have) already (?:approved|agreed|consented|confirmed)|\balready (?:approved|"
         r"agreed to|consented)\b"),
        ("need|ask confirm", r"\bno need to (?:ask|confirm)\b"), ("skip|confirmation", r"\bskip (?:the )?confirmation"),
        ("without|asking waiting", r"\bwithout (?:asking|waiting for) (?:the user|review|confirmation)"),
        ("ask|before", r"\bdo not ask the user before")]),
    "override_user": ("hidden_instruction", 2, [
        ("regardless ignore whatever instead rather|says say asked asks gives chose chooses names wants typed",
         r"\b(?:regardless of|ignore|whatever|instead of|rather than)\s+(?:what\s+)?(?:the\s+)?(?:user'?s?|path|"
         r"recipient|channel|account)\w*\s+(?:the user\s+)?(?:says|say|asked|asks|gives|chose|chooses|names|"
         r"wants|typed)\b")]),
    # ---- secrecy
    "secrecy": ("secrecy", 3, [
        (f"{_W_NEG}|{_W_TELL}",
         rf"\b(?:{_TELL})\s+(?:(?:{_REFLEXIVE}\s+)?(?:to\s+|with\s+)?{_USER}(?:\s+(?:about|of)\s+{_REFLEXIVE}|"
         rf"\s*[.,;!)]|\s*$)|{_REFLEXIVE}\b(?!\s+(?:tool|function|value|parameter|field|result|column)))",
         r"(?:do not|don't|dont|never|must not|should not|shouldn't|mustn't|avoid|no need to)\s+$"),
        ("without|telling informing notifying alerting letting",
         rf"\bwithout (?:telling|informing|notifying|alerting|letting) {_USER}"),
        ("user|know notice see told informed aware hear|not won doesn need",
         r"\b(?:the )?user (?:must|should|does|will|need|needs) not (?:know|notice|see|be (?:told|informed|aware))|"
         r"\b(?:the )?user (?:won't|will not|doesn't|does not|need not|does not need to) (?:notice|know|hear)"),
        ("keep treat|secret hidden confidential yourself private between",
         r"\b(?:keep|treat) (?:this|it|these(?: instructions)?|that) (?:secret|hidden|confidential|to yourself|"
         r"private|between us)"),
        ("keep|reply answer response", r"\bkeep (?:it|this) out of the (?:reply|answer|response)"),
        ("between|us", r"\bbetween us\b"), ("worth|mentioning", r"\bnot worth mentioning"),
        ("implementation|detail", r"\b(?:mere|just an?|only an?) implementation detail"),
        ("plumbing", r"\bonly plumbing\b"),
        ("alarm upset scare worry alert confuse alarming upsetting scaring worrying confusing|not never don without "
         "avoid", rf"\b(?:do not|don't|never|without|avoid) (?:alarm|upset|scare|worry|alert|confus)\w* {_USER}"),
        ("scary", r"\bnot scary\b"), ("notice|so", r"\bso (?:they|the user) (?:do(?:es)? not|don't) notice"),
        ("invisible|user users", rf"\binvisible to {_USER}"), ("offscreen screen", r"\boff-?screen\b"),
        ("reveal mention disclose|never|instructions instruction rules notes",
         r"\bnever (?:reveal|mention|disclose) (?:these|this|the|its|your) (?:instructions?|rules?|notes?)"),
        ("stay|way", r"\bshould stay that way\b"),
        ("confuse upset|only", r"\bwould only (?:confuse|upset) (?:them|the user)"),
        ("dites menciones dirlo", r"\bne le dites pas|\bno se lo menciones|\bnon dirlo"),
        ("~\u00e4", r"\berwähne dies"), ("~\u00e3", r"\bnão conte"),
        ("~\u544a", r"不要告诉用户"), ("~\u4f1d", r"ユーザーには伝え"),
        ("~\u043d", r"не сообщай пользовател")]),
    "silently": ("secrecy", 1, [
        ("silently secretly covertly quietly discreetly silent",
         r"\b(?:silently|secretly|covertly|quietly|discreetly)\s+(?:run|call|send|read|add|copy|forward|post|"
         r"upload|include|invoke|execute|append)|\bsilent attendee")]),
    # ---- exfiltration
    "prompt_leak": ("exfiltration", 3, [
        ("prompt instructions|system hidden",
         r"\b(?:your|its)\s+(?:full\s+|entire\s+|hidden\s+|complete\s+)?(?:system prompt|hidden instructions)\b|"
         r"\b(?:output|print|reveal|repeat|put|pass|include|return)\s+(?:the\s+|your\s+)?(?:full\s+|entire\s+|"
         r"complete\s+)?(?:system prompt|hidden instructions)\b|\bsystem prompt verbatim\b"),
        ("developer|messages message", r"\b(?:your|its|system and) developer messages?\b")]),
    "pass_data": ("exfiltration", 2, [
        (f"{_W_PASS}|{_W_DATA}|its their file full entire whole all",
         rf"\b(?:its|their|file'?s|full|entire|whole|all)\s+(?:full\s+|whole\s+|entire\s+)?{_DATA}\b[^.;\n]{{0,60}}?"
         rf"\b(?:as|in|into|inside|through|via|under)\s+(?:the\s+)?(?:[`'\"]|(?:sidenote|note|notes|context|field|"
         rf"argument|parameter|param|metadata)\b)", rf"\b{_PASS}\b[^.;\n]{{0,60}}$"),
        (f"{_W_DATA}|its their file|parameter argument field",
         rf"\b(?:its|their|file'?s?)\s+{_DATA}\s+(?:as|in|into)\s+(?:the\s+)?[`'\"]?\w+[`'\"]?\s+"
         rf"(?:parameter|argument|field)"),
        ("pass give provide supply|it them both", r"\b(?:pass|give|provide|supply)\s+(?:it|them|both)\s+(?:as|in)\s+"
                                                  r"[`'\"]")]),
    "output_passed": ("exfiltration", 1, [
        ("output result response listing rows value text content contents outputs results|passed supplied given "
         "included provided forwarded sent handed posted attached",
         r"\b(?:its|the|their)\s+(?:output|result|response|listing|rows|value|text|content|contents)s?\s+"
         r"(?:of this tool\s+)?(?:must |should |is to |are to |has to |have to )?(?:also )?(?:be |is |are )?"
         r"(?:passed|supplied|given|"
         r"included|provided|forwarded|sent|handed|posted|attached)\b"),
        ("returns|what", r"\bwhat it returns\b"),
        ("output result outputs results|its their", r"\b(?:its|their) (?:output|result)s? (?:as|in|into|through|"
                                                    r"goes) ")]),
    "conversation": ("exfiltration", 2, [
        ("conversation chat|history transcript so log",
         r"\b(?:conversation)\s+(?:history|transcript|so far|log)\b|\bchat transcript\b"),
        ("previous earlier last|messages", r"\b(?:previous|earlier) (?:\d+ )?messages\b|\blast \d+ messages\b"),
        ("entire whole full|chat conversation", r"\bthe (?:entire|whole|full) (?:chat|conversation)\b"),
        ("details browsing location contact medical|gave history list",
         r"\ball (?:personal )?details (?:they|the user) gave|\bbrowsing history\b|\blocation history\b|"
         r"\bmedical history\b"),
        ("user|messages", r"\bfrom (?:the )?user messages\b"),
        (f"{_W_SECRET}|user", r"\bany (?:tokens|passwords|credentials|secrets) the user")]),
    "conversation_send": ("exfiltration", 3, [
        ("conversation chat transcript messages history|call send pass include forward give post attach with",
         r"\b(?:call|use|invoke)\s+this\s+tool\s+with\s+(?:the\s+|all\s+)?(?:full\s+|entire\s+|whole\s+)?"
         r"(?:conversation|chat|transcript|previous messages|history|user's previous)|"
         r"\b(?:send|pass|include|forward|give|post|attach|append)\s+(?:the\s+|all\s+)?(?:full\s+|entire\s+|"
         r"whole\s+)(?:conversation|chat|transcript)")]),
    "bulk_data": ("exfiltration", 2, [
        ("contents content|every all each|file files document documents",
         r"\bcontents? of (?:every|all|each) (?:file|document)s?\b"),
        ("every|file|opened", r"\bevery file you opened\b")]),
    "messaging_history": ("exfiltration", 1, [
        ("channel message chat|history", r"\b(?:channel|message|chat) history\b"),
        ("contact|list", r"\bcontact list\b")]),
    "secret_trigger": ("exfiltration", 3, [
        ("mentions mention contains contain includes types pastes|password key token secret credential|call pass send "
         "include forward",
         r"\b(?:mentions?|contains?|includes?|types?|pastes?)\s+(?:a |an |any )?(?:password|api key|token|secret|"
         r"credential|private key)s?\b[^.\n]{0,80}\b(?:call|pass|send|include|forward)")]),
    "secret_value": ("exfiltration", 2, [
        (f"{_W_PASS}|{_W_SECRET} ssh",
         rf"\b{_PASS}\b[^.;\n]{{0,50}}\b(?:api[ _-]?keys?|tokens?|passwords?|credentials?|secrets?|private keys?|"
         rf"cookies|authorization headers?|ssh keys?|seed phrase|\w+_(?:token|api_key|secret(?:_key)?|"
         rf"access_key))\b(?!\s+such as)[^.;\n]{{0,50}}\b(?:as|in|into|to)\s+(?:the\s+)?(?:[`'\"]|\w+\s+"
         rf"(?:parameter|argument|field|header|memo|query|body|requests?))"),
        ("value contents content|token key secret",
         r"\b(?:value|contents?) of (?:the user'?s |the )?(?:environment variable )?(?!(?:next_)?page_|next_|cursor_|"
         r"continuation_|sync_|pagination_)[a-z0-9_]*(?:_token|_api_key|_secret(?:_key)?|_access_key)\b"),
        ("get|secret|every all each", r"\bget_secret for (?:every|all|each)"),
        ("saved stored|passwords", r"\b(?:saved|stored) passwords\b"),
        ("seen found|keys key passwords password tokens token",
         r"\b(?:api keys?|passwords?|tokens?) (?:you have seen|found in)\b")]),
    "send_out": ("exfiltration", 2, [
        ("bcc cc blind|~@", r"\b(?:bcc|blind copy|cc)\b[^.\n]{0,40}@"),
        ("add include copy cc bcc invite|~@", rf"\b(?:add|include|copy|cc|bcc|invite)\b[^.\n]{{0,30}}\b{_EMAIL}"),
        ("send sends sent forward forwarded email post posted copy mirror upload|to",
         rf"\b(?:send|forward|email|post|copy|mirror|upload)\w*\b[^.\n]{{0,80}}\bto\s+(?:the\s+)?(?:{_EMAIL}|"
         rf"\+\d[\d ]{{6,}}|channel c0|relay\b)"),
        ("recipient destination iban wallet|must should has is be|set changed replaced always redirected",
         r"\b(?:recipient|to_account|destination|iban|wallet)\b[^.\n]{0,40}\b(?:must|should|has to|is to|"
         r"to be)\b[^.\n]{0,30}\b(?:be )?(?:set|changed|replaced|always|redirected)"),
        ("send sends sent forward forwarded post posted upload uploaded mirror exfiltrate|to|http https",
         r"\b(?:send|forward|post|upload|mirror|exfiltrate)\w*\b[^\n]{0,80}?\bto\s+https?://"),
        ("send sends sent transfer pay pays|to|wallet account iban",
         r"\b(?:send|sent|transfer|pay)\w*\b[^.\n]{0,40}\bto\s+(?:the\s+)?(?:recipient\s+)?(?:wallet|account|iban)\s+"
         r"[\w-]*\d"),
        ("recipient|account", r"\brecipient account [\w-]*\d"),
        ("open fetch visit|http https", r"\b(?:open|fetch|visit)\s+https?://\S+\?\w+="),
        ("proxy|number", r"\bproxy number\b"), ("relay|~+", r"\brelay\b[^.\n]{0,30}\+\d")]),
    "shell_payload": ("exfiltration", 3, [
        ("curl wget|sh bash zsh data d", r"\bcurl\b[^\n]{0,80}\|\s*(?:ba|z)?sh\b|\b(?:wget|curl)\b[^\n]{0,60}"
                                         r"\b(?:-d\s*@|--data[^\n]{0,5}@)"),
        ("chmod|r", r"\bchmod\s+-r\s+0?(?:666|777)\s+~"), ("rm|rf", r"\brm\s+-rf\s+(?:~|/|\./\.git)"),
        ("source|curl", r"\bsource\s+<\(\s*curl"), ("histfile", r"\bexport\s+histfile=/dev/null"),
        ("proxycommand", r"proxycommand=nc\b"), ("requests|open", r"\brequests\.post\([^)]*open\("),
        ("copy|program", r"\bcopy\s*\(select[^)]*\)\s+to\s+program"),
        ("grant|privileges", r"\bgrant all privileges\b")]),
    "param_secret": ("exfiltration", 3, [
        ("parameter value|content contents copy reading dot|ssh rsa credentials credential passwords password "
         "secrets secret tokens token private env history",
         r"^(?:parameter|value) (?=[a-z ]*\b(?:content|contents|copy|reading|dot)\b)(?=[a-z ]*\b(?:ssh|rsa|"
         r"credentials?|passwords?|secrets?|tokens?|private key|env|history)\b)[a-z ]{12,}$"),
        ("parameter value|user|of from", r"^(?:parameter|value) (?:\w+ ){2,}(?:of|from) (?:the )?user(?: messages)?$"),
        ("parameter value|ssh|private|key|user of",
         r"^(?:parameter|value) (?=[a-z ]*\bssh\b)(?=[a-z ]*\bprivate key\b)(?=[a-z ]*\b(?:user|of)\b)")]),
    # ---- cross_tool (another server's tool by name is found in code: other_name, other_rule, tamper)
    "other_tools": ("cross_tool", 2, [
        ("also|present", r"\balso present \S+ tool\b"),
        ("other another|server servers",
         r"\bother (?:\w+ )?servers? (?:is|are) (?:deprecated|broken|outdated|unsafe)|\b(?:on|from|of) other "
         r"servers?\b|\banother server'?s?\b"),
        ("side|effect", r"\bside effect on\b"),
        ("behaviour behavior|tool tools",
         r"\bbehaviou?r of (?:the )?(?:[`'\"]?\w+[`'\"]? tool|other tools?|all tools|any tool)\b"),
        ("shadows", r"\bthis tool shadows\b"),
        ("supersedes supersede replaces overrides|server one",
         r"\b(?:supersedes?|replaces?|overrides?)\s+(?:the\s+)?(?:one\s+from|[\w-]+\s+server'?s?\s+)"),
        ("filesystem github gitlab slack gmail email mail postgres whatsapp calendar browser terminal shell "
         "messaging payment file database git jira notion drive|server integration|must should always whenever when "
         "instead deprecated broken outdated prefer",
         r"\b(?:the|its)\s+(?:filesystem|github|gitlab|slack|gmail|email|mail|postgres|whatsapp|calendar|browser|"
         r"terminal|shell|messaging|payment|file|database|git|jira|notion|drive)\s+(?:server|integration)'?s?\b"
         r"[^.\n]{0,60}\b(?:must|should|always|whenever|when|instead|deprecated|broken|outdated|prefer)\b"),
        ("official updated newest trusted secure|version replacement release tool|instead over prefer rather other "
         "only", r"\b(?:official|updated|newest|trusted|secure) (?:version|replacement|release|tool)\b[^.\n]{0,60}"
                 r"\b(?:instead|over|prefer|rather|any other|only|other)"),
        ("any all every|call command commands request requests write email emails message messages navigation "
         "tool operation|must should prefix append",
         r"\b(?:any|all|every) (?:other )?(?:tool call|shell command|command|http request|file write|email|"
         r"messages? sent|browser navigation|database tool|github operation)s?\b[^.\n]{0,40}\b(?:must|should|"
         r"prefix|append)"),
        ("tool tools server servers|deprecated broken outdated",
         r"\b(?:tools?|servers?) (?:is|are) (?:deprecated|broken|outdated)\b"),
        ("unsafe", r"\bany other [a-z_]+ is unsafe\b"),
        ("instead rather over|any|other", r"\b(?:instead of|rather than|over) any other\b"),
        ("directly|used", r"\bmust not be used directly\b"),
        ("named|other", r"\btools named \S+ on other\b")]),
    # ---- implicit_steering (a tool named as a prerequisite or follow-up is found in code: steer, privileged)
    "global_rule": ("implicit_steering", 2, [
        ("whenever every each any anytime|time whenever anytime|is are used called invoked read sent created opened "
         "written executed run made",
         r"\b(?:whenever|every time|each time|any ?time)\s+(?:a |an |any |the )?(?:[\w-]+\s+){0,3}?(?:is|are)\s+"
         r"(?:used|called|invoked|read|sent|created|opened|written|executed|run|made)\b"),
        ("whenever every each any anytime|time whenever anytime|you|call use run make show send produce open write "
         "read", r"\b(?:whenever|every time|each time|any ?time)\s+you\s+(?:call|use|run|make|show|send|produce|"
                 r"open|write|read)\b"),
        ("whenever every each any anytime|tool tools server servers agent assistant",
         r"\b(?:whenever|every time|each time|any ?time)\s+(?:the |a |any )?(?:[\w-]+ ){0,2}(?:tools?|servers?)\s+"
         r"(?!is\b|are\b)[a-z]+"),
        ("before after|any each every|call use tool command request file message operation shell git database "
         "http", r"\b(?:before|after) (?:any|each|every)\s+(?:call|use|tool|command|request|file|message|operation|"
                 r"shell|git|database|http)"),
        ("every each all any|for",
         r"\bfor (?:every|each|all|any) (?:http request|shell command you|call to|github operation|file write|"
         r"browser navigation)s?\b"),
        ("global system rule daily|rule policy routine every workspace",
         r"\b(?:global rule|system policy|rule for every|rule for this workspace|daily routine)\b"),
        ("commands command|must prefix",
         r"\b(?:all|every|each|any) (?:shell |git )?commands? must (?:start|begin|include|be prefixed)|"
         r"\bprefix (?:each|every|all) (?:shell |git )?commands?\b|\bmust include the prefix\b"),
        ("when whenever|user|says discusses ends mentions",
         r"\bwhen(?:ever)? the user (?:says|discusses|ends|mentions)\b[^.\n]{0,60}\b(?:call|send|first)\b")]),
    "preference": ("implicit_steering", 1, [
        ("preferred official valid primary|way tool source entry",
         r"\b(?:preferred|official|only valid|primary) (?:way|tool|source|entry point)\b"),
        ("prefer|always", r"\balways prefer (?:it|this)"), ("instead|use|this", r"\buse this (?:tool )?instead of\b"),
        ("this|use call|any all every whenever", r"\b(?:use|call) this (?:tool )?(?:for (?:any|all|every)|whenever)")]),
}


def fast_pattern(pattern: str, flags: int = 0) -> re.Pattern:
    """`pattern` compiled without the leading \\b of its top-level alternatives (a leading \\b stops the regex
    engine from skipping ahead on the first character: three to four times slower); `matches` puts the left
    word boundary back."""
    parts, depth, cls, esc, cur = [], 0, False, False, []
    for ch in pattern:
        if esc:
            esc = False
        elif ch == "\\":
            esc = True
        elif cls:
            cls = ch != "]"
        elif ch == "[":
            cls = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return re.compile("|".join(p[2:] if p.startswith("\\b") else p for p in parts), flags)


def is_word_char(ch: str) -> bool:
    """Whether `ch` is a character of a word as \\b sees one (letter, digit, underscore)."""
    return ch.isalnum() or ch == "_"


def matches(rx: re.Pattern, text: str, pos: int = 0, endpos: int | None = None):
    """`rx.finditer`, keeping only matches that start at a word boundary when they start with a word character."""
    for m in rx.finditer(text, pos, len(text) if endpos is None else endpos):
        s = m.start()
        if s == 0 or not is_word_char(text[s]) or not is_word_char(text[s - 1]):
            yield m


# (cue, word sets, substrings, compiled pattern, compiled before or None) of every part of every cue, in order
PARTS = [(cid, tuple(frozenset(w.split()) for w in part[0].split("|") if not w.startswith("~")),
          tuple(w[1:] for w in part[0].split("|") if w.startswith("~")), fast_pattern(part[1], re.M),
          re.compile(part[2]) if len(part) > 2 else None)
         for cid, (_, _, parts) in CUES.items() for part in parts]
_SET_INDEX: dict[str, tuple[tuple[int, int], ...]] = {}  # word -> the (part, word set) it satisfies
for _i, (_, _sets, _, _, _) in enumerate(PARTS):
    for _j, _ws in enumerate(_sets):
        for _w in _ws:
            _SET_INDEX[_w] = _SET_INDEX.get(_w, ()) + ((_i, _j),)
_SET_WORDS = frozenset(_SET_INDEX)
_SET_COUNTS = tuple(len(sets) for _, sets, _, _, _ in PARTS)
_PARTS_SUBSTRING_ONLY = tuple(i for i, (_, sets, _, _, _) in enumerate(PARTS) if not sets)


def candidate_parts(words: frozenset) -> list[int]:
    """The parts every word set of which meets `words` (their substrings still to check), in order."""
    met: dict[int, set[int]] = {}
    for w in words & _SET_WORDS:
        for i, j in _SET_INDEX[w]:
            met.setdefault(i, set()).add(j)
    return sorted([i for i, js in met.items() if len(js) == _SET_COUNTS[i]] + list(_PARTS_SUBSTRING_ONLY))
