"""Word lists the linker reads English text with: words that never name a thing on their own.

Function words (articles, pronouns, auxiliaries, prepositions, conjunctions), everyday verbs,
adverbs and evaluative adjectives, greetings and interjections, and the calendar's names. A
capitalised word from these lists at the start of a sentence ("Thanks", "Maybe", "Great") is not a
proper name; inside a run of lowercase words these end a noun phrase.
"""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


FUNCTION_WORDS = _words(
    """
    a an the this that these those there here where when why how what which who whom whose whatever
    i me my mine myself we us our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves one ones someone somebody
    something anyone anybody anything everyone everybody everything nobody nothing none no not nor
    and or but so yet if then than because since while although though unless until till whether
    as at by for from in into of off on onto out over under up upon with within without about above
    across after against along among around before behind below beneath beside besides between
    beyond down during except inside like near outside past per through throughout to toward towards
    via
    am is are was were be been being do does did doing done have has had having will would shall
    should can could may might must ought let lets
    all any both each either every few many more most much neither other others own same several
    some such enough less least lot lots
    very really quite rather too also just only even still already again ever never always often
    sometimes usually perhaps maybe probably definitely certainly actually basically literally
    totally absolutely simply especially recently lately soon now today tonight tomorrow yesterday
    later earlier once twice ago away back yes yeah yep no nope ok okay oh ah hey hi hello bye
    wow whoa oops please thanks thank sorry well sure right alright anyway though indeed instead
    """
)

#: Everyday verbs in their usual forms: they tell what happened, not what it happened to.
COMMON_VERBS = _words(
    """
    go goes going went gone get gets getting got gotten make makes making made take takes taking took
    taken come comes coming came see sees seeing saw seen know knows knowing knew known think thinks
    thinking thought say says saying said tell tells telling told give gives giving gave given find
    finds finding found feel feels feeling felt try tries trying tried use uses using used want wants
    wanting wanted need needs needing needed look looks looking looked seem seems seemed keep keeps
    keeping kept start starts starting started begin begins began begun put puts putting run runs
    running ran call calls calling called help helps helping helped ask asks asking asked show shows
    showing showed shown work works working worked play plays playing played love loves loving loved
    like likes liking liked hope hopes hoping hoped mean means meaning meant leave leaves leaving left
    bring brings bringing brought become becomes becoming became turn turns turning turned move moves
    moving moved live lives living lived believe believes believed happen happens happened include
    includes including included continue continues continued set sets setting change changes changing
    changed hear hears heard talk talks talking talked check checks checking checked add adds adding
    added remember remembers remembered enjoy enjoys enjoying enjoyed share shares sharing shared
    wish wishes wished plan plans planning planned decide decides decided learn learns learning learned
    learnt guess guessed sound sounds sounded stay stays stayed let's gonna wanna gotta fix fixes fixed
    fixing update updates updated run ran build builds built write writes wrote written read reads
    """
)

#: Words of judgement and degree that qualify a thing without naming one.
COMMON_ADJECTIVES = _words(
    """
    good great nice cool awesome amazing awful bad better best worse worst big small little large
    huge tiny new old young long short high low hard easy real true false sure happy glad sad fun
    funny lovely wonderful beautiful fantastic incredible super special important different whole
    certain main able own next last first second third final other another such kind sort type
    many much lot bit way thing things stuff time times day days week weeks month months year years
    """
)

CALENDAR = _words(
    """
    monday tuesday wednesday thursday friday saturday sunday january february march april may june
    july august september october november december jan feb mar apr jun jul aug sep sept oct nov dec
    """
)

#: Words that never name a thing alone, whatever their case.
NOT_NAMES = FUNCTION_WORDS | COMMON_VERBS | COMMON_ADJECTIVES | CALENDAR

#: Words that may join capitalised words inside one name ("Lord of the Rings", "Johnson & Johnson").
NAME_JOINERS = frozenset({"of", "the", "&", "de", "da", "del", "van", "von"})

#: Words that make a proper name an organisation's.
ORGANISATION_WORDS = _words(
    """
    inc inc. corp corp. corporation ltd ltd. llc gmbh ag sa plc co co. company group bank university
    college institute foundation association agency ministry department labs technologies systems
    """
)

#: Titles before a person's name.
HONORIFICS = frozenset({"mr", "mrs", "ms", "miss", "dr", "prof", "sir", "dame"})

#: SQL's words, which a query writes in capitals.
SQL_KEYWORDS = _words(
    """
    select insert update delete create drop alter table from where join inner outer left right on
    group order by having limit offset union all distinct as and or not null is in values set into
    with case when then else end count sum avg min max match return merge unwind optional
    """
)
