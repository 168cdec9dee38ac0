// Two numbers are called advantage in the replay: each token's own, which the policy loss weighs that token by (the
// Tokens view's colours), and the episode's, the record's `advantage`: the mean of its trained tokens' (the group
// table, the Reward tab). Each is named here once, so every view says which one it shows and a reader comparing the
// group table with the token colours is not left to guess why 1.31 there is 2.63 here.
export const ADVANTAGE = {
  episode: {
    label: 'mean advantage',
    help: "The episode's advantage: the mean of its trained tokens' advantages (loss mask 1). The Tokens view colours each token by its own.",
  },
  token: {
    label: 'token advantage',
    help: "Each trained token's own advantage, which the loss weighs it by; the episode's mean advantage (the group table's) is their mean.",
  },
} as const;
