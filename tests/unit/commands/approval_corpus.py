"""Replies people write to "Deploy v1.4 to production?", each labelled with what Baton must do.

`A` approve: an unconditional yes to *this* gate, now. `R` reject: a clear no. `U` unclear:
anything else (a condition, a deferral, a joke, a third party, another target, a question,
a narrower scope, mixed signals): Baton asks back with Approve / Reject buttons.

Labelled by what a careful colleague would do with the reply, not by what the classifier
happens to answer. The adapters remove the bot's own mention before classification, so a
mention left in the text is always someone else's.
"""

from __future__ import annotations

A, R, U = "approve", "reject", "unclear"

#: Every example the issue quotes: they all approved before; none may approve now.
FROM_THE_ISSUE: list[tuple[str, str]] = [
    ("I wouldn't approve this without tests", U),
    ("couldn't approve this", R),
    ("nobody should approve this", R),
    ("wouldn't ship", R),
    ("isn't ready to ship", R),
    ("ain't approving this", R),
    ("approve after tests pass", U),
    ("lgtm once CI is green", U),
    ("ship it tomorrow", U),
    ("ship it /s", U),
    ("ship it. jk", U),
    ("go ahead and cancel", U),
    ("yes please cancel", U),
    ("👍 on cancelling", U),
    ("Bob should approve this", U),
    ("approve once Jane signs off", U),
    ("approve only the first step", U),
    ("approved for staging only", U),
    ("looks good except the tests fail", U),
    ("ok let me check", U),
    ("okay, I'll look at it", U),
    ("sure, after lunch", U),
    ("go home", U),
    ("approve: after the freeze", U),
    ("lgtm, except the migration", U),
    ("I would not approve this", R),
    ("approve after the tests pass", U),
    ("Bob should approve", U),
    ("approve the rollback instead", U),
    ("approve: looks fine", A),
    ("reject: too risky", R),
    ("@Baton lgtm", A),
    ("lgtm", A),
]

CLEAR_APPROVALS: list[tuple[str, str]] = [
    ("approve", A), ("approved", A), ("Approved", A), ("APPROVED", A), ("approved!", A),
    ("Approved ✅", A), ("approve.", A), ("I approve", A), ("i approve this", A), ("approving", A),
    ("lgtm", A), ("LGTM", A), ("LGTM!", A), ("lgtm!!", A), ("LGTM 👍", A), ("lgtm 🚀", A),
    ("lgtm, thanks", A), ("lgtm thx", A), ("lgtm from me", A), ("LGTM, nice work", A),
    ("sgtm", A), ("ship it", A), ("Ship it!", A), ("ship it 🚢", A), ("SHIP IT", A),
    ("shipit", A), ("ship it please", A), ("yes", A), ("Yes", A), ("yes!", A), ("Yes.", A),
    ("yes please", A), ("yes, please", A), ("Yes please, thanks!", A), ("yesss", A),
    ("yeees", A), ("yep", A), ("yup", A), ("yeah", A), ("yea", A), ("y", A), ("Y", A), ("ok", A),
    ("OK", A), ("okay", A), ("Okay!", A), ("ok 👍", A), ("okkk", A), ("sure", A), ("sure thanks", A),
    ("go", A), ("go!", A), ("go ahead", A), ("Go ahead.", A), ("yes go ahead", A),
    ("Yes, go ahead.", A), ("go ahead please", A), ("please go ahead", A), ("go for it", A),
    ("Go for it 🚀", A), ("proceed", A), ("please proceed", A), ("Proceed.", A), ("do it", A),
    ("just do it", A), ("send it", A), ("continue", A), ("carry on", A), ("make it so", A),
    ("sounds good", A), ("sounds good to me", A), ("Sounds great!", A), ("looks good", A),
    ("looks good to me", A), ("Looks great, thanks!", A), ("looks fine", A),
    ("looks good, ship it", A), ("all good", A), ("all good, go ahead", A), ("good to go", A),
    ("we're good to go", A), ("we're good", A), ("ready to go", A), ("confirm", A),
    ("confirmed", A), ("accept", A), ("accepted", A), ("let's go", A), ("Let's go!", A),
    ("lets go 🚀", A), ("let's do it", A), ("green light", A), ("greenlit", A), ("+1", A),
    ("+1 ship it", A), ("aye", A), ("affirmative", A), ("roger", U), ("merge", A),
    ("deploy", A), ("deploy it", A), ("publish", A), ("release it", A), ("signed off", A),
    ("works for me", A), ("fine by me", A), ("ok by me", A), ("OK with me", A), ("good with me", A),
    ("happy with this, approve", A), ("👍", A), ("👍👍", A), ("👍🏽", A), ("👍🏻 thanks", A),
    ("✅", A), ("✔️", A), ("🚀", A), ("🚢", A), ("👌", A), ("🆗", A), ("(y)", A), ("👍 🎉", A),
    ("✅ approved", A), ("approved 🎉🎉", A), ("yes 🙏", A), ("ship it 🔥", A), ("lgtm :)", A),
    ("totally, ship it", A), ("definitely, go ahead", A), ("absolutely, approve", A),
    ("yes, absolutely", A), ("for sure, go", A), ("of course, approve", A),
    ("yes, approve it", A), ("approve it", A), ("approve this one", A), ("approve now", A),
    ("ship it now", A), ("go ahead now", A), ("ok then, go ahead", A), ("yes and thanks", A),
    ("hey team, lgtm", U), ("hey, lgtm", A), ("hi, approved", A), ("thanks, approved", A),
    ("thank you, approve", A),
    ("nice work, ship it", A), ("great job, approved", A), ("well done! lgtm", A),
    ("awesome, go ahead", A), ("perfect, ship it", A), ("cool, approved", A),
    ("*approved*", A), ("_lgtm_", A), ("**LGTM**", A), ("`approve`", U),
    ("approve: looks fine", A), ("approve, looks fine", A), ("approved: nice work", A),
    ("LGTM - great notes", A), ("approved — thanks for the quick fix", A),
    ("approve: tested the build locally", A), ("lgtm: the diff is small", A),
    ("ship it: notes read well", A), ("approve: numbers match the dashboard", A),
    # other languages
    ("oui", A), ("ja", A), ("Ja, bitte", A), ("sí", A), ("si", A), ("sim", A), ("da", A),
    ("да", A), ("tak", A), ("はい", A), ("是的", A), ("好的", A), ("genehmigt", A),
    ("d'accord", A), ("vale", A), ("claro", A), ("aprobado", A), ("approuvé", A),
]

CLEAR_REJECTIONS: list[tuple[str, str]] = [
    ("no", R), ("No.", R), ("NO", R), ("no!", R), ("nope", R), ("Nope.", R), ("nah", R),
    ("noooo", R), ("n", R), ("reject", R), ("rejected", R), ("Rejected.", R), ("deny", R),
    ("denied", R), ("decline", R), ("declined", R), ("veto", R), ("stop", R), ("STOP", R),
    ("abort", R), ("halt", R), ("cancel", R), ("please cancel", R), ("cancel it", R),
    ("no go", R), ("no-go", R), ("hard no", R), ("hell no", R), ("absolutely not", R),
    ("definitely not", R), ("not a chance", R), ("no way", R), ("No way!", R), ("never", R),
    ("-1", R), ("👎", R), ("❌", R), ("🛑", R), ("⛔", R), ("🚫", R), ("👎👎", R),
    ("no 👎", R), ("nope, thanks", R), ("no thanks", R), ("reject please", R),
    ("don't ship", R), ("don't ship it", R), ("don’t ship it", R), ("do not ship it", R),
    ("dont ship", R), ("don't approve", R), ("don't approve this", R), ("do not approve", R),
    ("do not proceed", R), ("don't go ahead", R), ("no, don't go ahead", R), ("not approved", R),
    ("never approve this", R), ("I can't approve", R), ("I cannot approve this", R),
    ("can't approve this", R), ("won't ship", R), ("wouldn't ship", R), ("shouldn't merge", R),
    ("we shouldn't ship this", R), ("I dont think we should ship", R), ("dont lgtm", R),
    ("ain't approving this", R), ("couldn't approve this", R), ("nobody should approve this", R),
    ("isn't ready to ship", R), ("not ready to ship", R), ("I'm not approving this", R),
    ("no way I'm approving this", R), ("not going to approve this", R),
    ("reject: too risky", R), ("Rejected - wrong version", R), ("no, too risky", R),
    ("nah, too risky", R), ("deny: not today", R), ("reject: the numbers are wrong", R),
    ("no: breaks the API", R), ("nope - tests are red", R), ("rejected: needs a changelog", R),
    ("declined, wrong branch", R), ("veto: blocked by the security review", R),
    ("no, stop", R), ("stop, no", R), ("no. don't", R), ("nein", R), ("non", R), ("nee", R),
    ("nie", R), ("não", R), ("нет", R), ("いいえ", R), ("不行", R), ("abgelehnt", R),
]

HEDGES: list[tuple[str, str]] = [
    ("maybe", U), ("maybe lgtm", U), ("probably fine", U), ("probably ok", U),
    ("possibly, not sure", U), ("I guess", U), ("I guess so", U), ("I think so", U),
    ("lgtm I think", U), ("lgtm probably", U), ("seems ok?", U), ("should be fine", U),
    ("hopefully fine", U), ("fine I guess", U), ("idk", U), ("dunno, ship it?", U),
    ("hmm", U), ("hmm lgtm", U), ("um ok", U), ("uh, sure", U), ("not sure", U),
    ("not sure, lgtm?", U), ("ok...", U), ("sure…", U), ("fine.", U), ("fine", U),
    ("I suppose", U), ("if you say so", U), ("whatever", U), ("meh", U), ("eh, ship it", U),
    ("kinda looks good", U), ("mostly lgtm", U), ("lgtm mostly", U), ("looks ok-ish", U),
    ("approve-ish", U), ("sort of", U), ("yes and no", U), ("yes no", U), ("no yes", U),
    ("ok but", U), ("ok, but", U), ("yes, but", U), ("ship it but fix the title first", U),
    ("lgtm but one nit", U), ("approve but watch the error rate", U), ("approved, but barely", U),
    ("looks good, though the notes are thin", U), ("good enough", U), ("close enough, ship", U),
    ("I'd ship it", U), ("I would approve", U), ("I'd approve", U), ("would approve", U),
    ("I could approve this", U), ("lgtm in principle", U), ("ship it maybe", U),
]

CONDITIONS: list[tuple[str, str]] = [
    ("approve after tests pass", U), ("approve after CI", U), ("approve after the freeze", U),
    ("ship it after lunch", U), ("yes after the standup", U), ("lgtm once CI is green", U),
    ("approve once the migration lands", U), ("ship once QA signs off", U),
    ("go ahead when ready", U), ("approve when the tests pass", U), ("ship when green", U),
    ("ship it when Bob is back", U), ("hold until the freeze ends", U),
    ("don't ship until Monday", U), ("approve if tests pass", U), ("if the tests pass, ship it", U),
    ("lgtm if green", U), ("yes if CI passes", U), ("yes, if the dashboards look fine", U),
    ("ship it unless Bob objects", U), ("approve unless something breaks", U),
    ("lgtm provided the backup ran", U), ("approve assuming tests pass", U),
    ("approve pending QA", U), ("lgtm as long as the rollback works", U),
    ("ok as long as you watch it", U), ("yes, given the backup ran", U),
    ("approve: once the backup is done", U), ("approve: if nobody objects", U),
    ("lgtm - as long as CI is green", U), ("approved, pending QA", U),
    ("go ahead after you bump the version", U), ("sure, once Jane approves", U),
    ("approve before 5pm", U), ("ship it before the freeze", U),
    ("I wouldn't approve this without tests", U), ("not without a rollback plan", U),
    ("approve: without the migration", U), ("only if the tests pass", U),
    ("depends on the tests", U), ("depends", U),
]

DEFERRALS: list[tuple[str, str]] = [
    ("ship it tomorrow", U), ("approve tomorrow", U), ("tomorrow", U), ("tonight", U),
    ("ship it tonight", U), ("later", U), ("approve later", U), ("lgtm, later", U),
    ("not now", U), ("not yet", U), ("not yet?", U), ("not today", U), ("yes, tomorrow", U),
    ("ok, tomorrow morning", U), ("next week", U), ("approve next week", U),
    ("Monday", U), ("ship it on Monday", U), ("after the weekend", U), ("in an hour", U),
    ("approve in 10 minutes", U), ("give me 5 min", U), ("wait", U), ("wait!", U),
    ("hold on", U), ("hold off", U), ("please hold off", U), ("pause", U), ("one sec", U),
    ("brb", U), ("let me check", U), ("ok let me check", U), ("let me look first", U),
    ("looking", U), ("👀", U), ("checking now", U), ("will check", U), ("will approve later", U),
    ("I'll approve it after lunch", U), ("okay, I'll look at it", U), ("sure, after lunch", U),
    ("yes but not now", U), ("soon", U), ("eventually", U), ("EOD", U), ("ship it eod", U),
    ("approve: tomorrow", U), ("lgtm: next week", U), ("not until Monday", U),
    ("don't ship it yet", U), ("don't approve yet", U), ("I haven't approved this yet", U),
    ("haven't reviewed it yet", U),
]

SARCASM: list[tuple[str, str]] = [
    ("ship it /s", U), ("ship it. jk", U), ("lgtm jk", U), ("approve lol", U),
    ("lol approve", U), ("lgtm lmao", U), ("ship it 🙄", U), ("🙄", U), ("sure 🙄", U),
    ("yeah right", U), ("Yeah right, ship it", U), ("ok 😒", U), ("approve 🤡", U),
    ("ship it 😂", U), ("lgtm 🤣", U), ("sure jan", U), ("yes ;)", U), ("lgtm :p", U),
    ("approve, kidding", U), ("just kidding", U), ("jk", U), ("j/k don't", U),
    ("ship it, what could go wrong", U), ("sure, what's the worst that could happen", U),
    ("yolo", U), ("ship it 🔥🔥🔥 (it's on fire)", U), ("approve haha", U), ("lol no", U),
    ("lgtm 🙃", U), ("\"lgtm\"", U), ("~ship it~", U), ("~~approve~~", U), ("ship it?!", U),
    ("approved... not", U), ("lgtm (not)", U), ("NOT approved lol", U), ("approve: jk", U),
]

THIRD_PARTIES: list[tuple[str, str]] = [
    ("Bob should approve this", U), ("Bob should approve", U), ("ask Bob", U),
    ("approve once Jane signs off", U), ("Jane can approve", U), ("let Jane decide", U),
    ("<@U123> lgtm?", U), ("<@U123> can you approve?", U), ("<@U123> approve", U),
    ("<@U123> lgtm", U), ("lgtm <@U123>", U), ("<@123> approve", U), ("<@!123> ship it", U),
    ("<@U0BOB> please approve", U), ("@bob approve this", U), ("cc @bob", U),
    ("lgtm, cc <@U123>", U), ("approved by Bob", U), ("Bob says lgtm", U),
    ("Bob said ship it", U), ("the team approves", U), ("security approved", U),
    ("someone else should approve", U), ("not my call", U), ("ask the SRE on call", U),
    ("<!here> approve?", U), ("<#C123> lgtm", U), ("nobody approve anything", U),
    ("you approve", U), ("you decide", U), ("your call", U),
]

SOMETHING_ELSE: list[tuple[str, str]] = [
    ("approve the rollback instead", U), ("approve the other one", U),
    ("approve the previous run", U), ("ship v1.3 instead", U), ("deploy to staging", U),
    ("approved for staging only", U), ("approve only the first step", U),
    ("approve the migration but not the deploy", U), ("ship the docs only", U),
    ("approve step 1", U), ("approve half", U), ("approve 50%", U),
    ("lgtm for the frontend", U), ("lgtm for staging", U), ("ship it to canary", U),
    ("approve everything except the DB change", U), ("looks good except the tests fail", U),
    ("lgtm, except the migration", U), ("approve: only the API part", U),
    ("yes to staging, no to prod", U), ("go to staging", U), ("go home", U), ("go away", U),
    ("roll back", U), ("rollback", U), ("revert", U), ("revert it", U), ("merge the hotfix", U),
    ("deploy the old version", U), ("approve #1234", U), ("approve r-abc", U),
    ("run it again", U), ("retry", U), ("rerun", U), ("redeploy", U),
]

CANCEL_WITH_YES: list[tuple[str, str]] = [
    ("go ahead and cancel", U), ("yes please cancel", U), ("yes, cancel it", U),
    ("ok stop", U), ("ok, stop it", U), ("sure, abort", U), ("yes abort", U),
    ("👍 on cancelling", U), ("👍 cancel", U), ("yes, reject it", U), ("ok reject", U),
    ("yep, kill it", U), ("ship it, no wait", U), ("go ahead, no wait", U),
    ("approve, no, reject", U), ("lgtm, nope", U), ("no, ship it", U), ("nope, lgtm", U),
    ("no problem", U), ("no problem, ship it", U), ("no worries", U), ("no objections", U),
    ("no rush", U), ("no idea", U), ("no need", U), ("don't stop", U), ("don't cancel", U),
    ("not no", U), ("can't not approve this", U), ("why not", U), ("no reason not to ship", U),
    ("no, wait", U), ("no wait, ship it", U), ("stop, go", U), ("halt? no, go", U),
]

QUESTIONS: list[tuple[str, str]] = [
    ("approve?", U), ("lgtm?", U), ("ship it?", U), ("should I approve?", U),
    ("can I approve this?", U), ("what does it change?", U), ("why?", U), ("what is this?", U),
    ("is this safe?", U), ("did the tests pass?", U), ("who asked for this?", U),
    ("which version?", U), ("approve what?", U), ("yes?", U), ("ok?", U), ("go?", U),
    ("can we wait", U), ("can we wait?", U), ("should we ship this", U),
    ("how long will it take", U), ("what's the rollback plan", U), ("is CI green", U),
    ("¿sí?", U), ("好吗？", U), ("approve？", U), ("?", U), ("??", U),
]

NEGATED: list[tuple[str, str]] = [
    ("I wouldn't approve this", R), ("wouldn't approve", R), ("I couldn't approve this", R),
    ("I can't approve this", R), ("can't ship this", R), ("won't approve", R),
    ("I won't approve it", R), ("we shouldn't merge this", R), ("shouldn't ship", R),
    ("must not ship", R), ("isn't ready to ship", R), ("this isn't ready", R),
    ("it's not ready", R), ("not good", R), ("not ok", R), ("not okay", R), ("not lgtm", R),
    ("this is not ok", R), ("not approved", R), ("never approve this", R), ("nobody approve", R),
    ("no one should approve this", R), ("I don't approve", R), ("i do not approve", R),
    ("I don't want to approve this", R), ("don't wanna ship this", R), ("haven't approved", U),
    ("I didn't approve this", U), ("wasn't me", U), ("not me", U), ("not this one", U),
    ("not this time", U), ("no thanks, not now", U), ("don't", U), ("not", U),
    ("nope, not yet", U), ("no, not until Monday", U), ("no, never", R), ("never!", R),
]

EMOJI_MIXES: list[tuple[str, str]] = [
    ("👍👎", U), ("👍❌", U), ("✅❌", U), ("👍?", U), ("👍🤔", U), ("🤔", U), ("😬", U),
    ("🤷", U), ("🤷‍♂️ ship it", U), ("👀 lgtm", U), ("💀", U), ("🔥", U), ("🎉", U),
    ("🙏", U), ("👍 😬", U), ("🚀🙄", U), ("🙂", U), ("❤️", U), ("💯", U), ("🫡", U),
    ("✅ 🎉 🚀", A), ("🚢 👍 🙌", A), ("👎 🛑", R), ("❌ no", R), ("👍 approved 🙌", A),
    ("😅 lgtm", U), ("lgtm 😅", U), ("🙅", R), ("🙅‍♀️", R),
]

CHATTER: list[tuple[str, str]] = [
    ("", U), ("   ", U), ("hello there", U), ("hi", U), ("thanks", U), ("thank you!", U),
    ("nice", U), ("cool", U), ("great", U), ("wow", U), ("interesting", U), ("hm ok", U),
    ("got it", U), ("noted", U), ("ack", U), ("seen", U), ("on it", U), ("working on it", U),
    ("good morning", U), ("morning all", U), ("lunch?", U), ("brb coffee", U),
    ("the build is green", U), ("tests passed", U), ("CI is green", U), ("deployed yesterday", U),
    ("this is fine", U), ("this is fine 🔥", U), ("ok so", U), ("right", U), ("indeed", U),
    ("same", U), ("agreed", U), ("+1 to what Bob said", U), ("ditto", U), ("good question", U),
]

LANGUAGES: list[tuple[str, str]] = [
    ("oui, merci", A), ("ja, danke", A), ("sí, gracias", A), ("da, spasibo", A),
    ("non merci", R), ("nein danke", R), ("oui mais demain", U), ("ja, aber morgen", U),
    ("sí pero mañana", U), ("si les tests passent", U), ("peut-être", U), ("vielleicht", U),
    ("quizás", U), ("pas maintenant", U), ("nicht jetzt", U), ("no sé", U),
    ("d'accord, après le déjeuner", U), ("好", A), ("可以", A), ("不", R), ("不要", R),
    ("明天", U), ("はい、明日", U), ("네", A), ("아니요", R), ("approve: aber erst morgen", U),
    ("approve: mais pas en prod", U), ("lgtm - pero mañana", U), ("approve: 明天", U),
    ("approve: nur staging", U), ("approve, approve, over my dead body", U),
    ("lgtm, hell no", U), ("approve: absolutely not", U), ("approve, yeah right", U),
    ("lgtm - sure jan", U), ("approve: go home", U), ("ship it: si les tests passent", U),
    ("approve: merci", A),
]

SLACK_AND_DISCORD_TEXT: list[tuple[str, str]] = [
    (":+1:", A), (":+1::skin-tone-3:", A), ("lgtm :+1:", A), (":white_check_mark: approved", A),
    (":rocket:", A), (":shipit:", A), (":thumbsup: thanks", A), (":-1:", R), (":x:", R),
    (":no_entry: no", R), (":eyes:", U), (":face_with_rolling_eyes:", U), ("ship it :upside_down_face:", U),
    (":thinking_face: lgtm", U), (":+1: :-1:", U), ("lgtm :joy:", U), ("<:shipit:1234567> lgtm", U),
    ("<@U024BE7LH|bob> lgtm", U), ("<@&1234> approve", U), ("<https://ci.example/123|CI> green, ship", U),
    ("*lgtm* :tada:", A), ("~lgtm~", U), ("> lgtm", U), ("```lgtm```", U), ("||ship it||", U),
]

ASKING_OTHERS: list[tuple[str, str]] = [
    ("please approve", U), ("please approve 🙏", U), ("pls approve", U), ("approve please", U),
    ("please confirm", U), ("please review", U), ("y'all approve", U), ("team, approve", U),
    ("everyone approve", U), ("folks, ship it", U), ("then approve", U), ("and then ship it", U),
    ("someone approve this", U), ("can someone approve", U), ("approvers, please", U),
]

#: Code and quotes are never this person's decision (issue 25): an example, a command, someone
#: else's words. They ask back, whatever they contain.
CODE_AND_QUOTES: list[tuple[str, str]] = [
    ("```lgtm```", U), ("```\nlgtm\n```", U), ("```\napprove\n```\n", U), ("``lgtm``", U),
    ("`approve`", U), ("`lgtm` 👍", U), ("👍 `ship it`", U), ("lgtm `", U), ("```lgtm", U),
    ("> lgtm", U), (">lgtm", U), ("&gt; lgtm", U), ("> approve\nyes", U), ("yes\n> lgtm", U),
    ("> ship it\n> 👍", U), ("`reject`", U), ("```no```", U), ("> nope", U),
    ("approve: fixed in `a1f3`", A), ("reject: `make test` fails", R),
]

#: An approval taken back in the same reply, a slip, a try: nothing was decided.
TAKEN_BACK: list[tuple[str, str]] = [
    ("approve, nvm", U), ("approve: never mind", U), ("lgtm, nevermind", U), ("ok nvm", U),
    ("approve, scratch that", U), ("approve; ignore that", U), ("approve: ignore me", U),
    ("approve: disregard", U), ("lgtm: oops, wrong run", U), ("approve: oops", U),
    ("approve: typo", U), ("approve: on second thought", U), ("approve: second thoughts", U),
    ("approve: retracted", U), ("approve: sorry, wrong thread", U), ("approve, my bad", U),
    ("approve: by mistake", U), ("approve: accidentally", U), ("approve: strike that", U),
    ("approve: just testing", U), ("approve: test", U), ("approve: WIP", U),
    ("approve: forget it", U), ("approve: misclick", U), ("approve: fat finger", U),
    ("approve: revoke", U), ("approve: withdrawn", U), ("approve: take it back", U),
    ("approve, vergiss es", U), ("approve, abbrechen", U),
    # a yes given with misgivings, against one's judgment, or with a shrug
    ("approve: I disagree", U), ("approve: worried", U), ("lgtm: concerned about the index", U),
    ("approve: yikes", U), ("approve: YOLO", U), ("approve: fingers crossed", U),
    ("approve: whatever", U), ("approve: your funeral", U), ("approve: under protest", U),
    ("approve — with reservations", U), ("approve: famous last words", U), ("approve: meh", U),
    ("reject: dangerous", R), ("reject: concerned about the index", R),
]

CORPUS: list[tuple[str, str]] = [
    *FROM_THE_ISSUE, *TAKEN_BACK, *CLEAR_APPROVALS, *CLEAR_REJECTIONS, *HEDGES, *CONDITIONS, *DEFERRALS,
    *SARCASM, *THIRD_PARTIES, *SOMETHING_ELSE, *CANCEL_WITH_YES, *QUESTIONS, *NEGATED,
    *EMOJI_MIXES, *CHATTER, *LANGUAGES, *SLACK_AND_DISCORD_TEXT, *ASKING_OTHERS, *CODE_AND_QUOTES,
]
